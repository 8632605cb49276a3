"""Breadth/depth arithmetic: level 1 has `breadth` queries, each level halves it, rounded up."""

import math


def children_per_query(breadth: int, level: int) -> int:
    """How many children a query at `level` (1-based) spawns: ceil(b(level) / 2), never below 1."""
    return max(1, math.ceil(level_breadth(breadth, level) / 2))


def level_breadth(breadth: int, level: int) -> int:
    """b(1) = breadth, b(k+1) = ceil(b(k) / 2)."""
    b = breadth
    for _ in range(level - 1):
        b = max(1, math.ceil(b / 2))
    return b


def queries_per_level(breadth: int, depth: int) -> list[int]:
    """Number of queries at each level 1..depth."""
    counts = [breadth]
    for level in range(1, depth):
        counts.append(counts[-1] * children_per_query(breadth, level))
    return counts


def total_queries(breadth: int, depth: int) -> int:
    return sum(queries_per_level(breadth, depth))


def gap_round_queries(breadth: int) -> int:
    """Depth-1 branches one gap-filling round adds (adaptive mode): planned like the level below the top, half the
    breadth rounded up, for the gaps the coverage evaluation named rather than the whole request again."""
    return children_per_query(breadth, 1)


def descendants(breadth: int, depth: int, level: int) -> int:
    """Queries below one level-`level` query when its whole subtree runs (none below the last level)."""
    total, width = 0, 1
    for k in range(level, depth):
        width *= children_per_query(breadth, k)
        total += width
    return total
