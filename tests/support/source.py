"""The project's own source, parsed for the tests that check its structure."""

import ast

MISMATCH = "AST constructor recursion depth mismatch"
ATTEMPTS = 5


def parse(source: str) -> ast.Module:
    """`ast.parse`, run again when CPython 3.11's race in it strikes. That version keeps the depth of its conversion
    of a parse tree into Python objects in one counter for the whole interpreter; when a garbage collection or a
    finaliser lets another thread run mid-conversion, and that thread parses too (formatting a traceback parses the
    failing line), the counter moves under this parse, which fails with a SystemError of that message. The source
    parses the same every time, so another try is an honest answer."""
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(source)
        except SystemError as error:
            if MISMATCH not in str(error) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
