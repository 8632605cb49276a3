"""Print (or with --write, update in README.md) the configuration table generated from .env.example."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def table() -> str:
    rows, comment = [], []
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.startswith("# ---") or not line.strip():
            comment = []
        elif line.startswith("#"):
            comment.append(line[1:].strip())
        elif match := re.match(r"^([A-Z0-9_]+)=(.*)$", line):
            value = f"`{match.group(2)}`" if match.group(2) else ""
            rows.append(f"| `{match.group(1)}` | {value} | {' '.join(comment)} |")
            comment = []
    return "\n".join(["| variable | example / default | meaning |", "|---|---|---|", *rows])


def main() -> None:
    generated = f"{START}\n{table()}\n{END}"
    if "--write" in sys.argv:
        readme = (ROOT / "README.md").read_text()
        readme = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: generated, readme, flags=re.DOTALL)
        (ROOT / "README.md").write_text(readme)
    else:
        print(generated)


if __name__ == "__main__":
    main()
