"""The tree's arithmetic, against the product's table of sizes written out (not computed by the code under test)."""

import pytest

from research.record.planning import descendants, total_queries

TABLE = [(1, 1, 1), (2, 2, 4), (4, 2, 12), (2, 4, 8), (3, 3, 15), (4, 3, 20), (6, 4, 96), (5, 5, 110)]


@pytest.mark.parametrize(("breadth", "depth", "total"), TABLE)
def test_planning_totals_match_the_table(breadth: int, depth: int, total: int) -> None:
    assert total_queries(breadth, depth) == total


@pytest.mark.parametrize(("breadth", "depth", "total"), TABLE)
def test_planning_a_top_level_subtree_is_a_breadth_th_of_the_tree(breadth: int, depth: int, total: int) -> None:
    # every top-level query heads an equal subtree, so a failed one takes exactly that share off the plan
    assert breadth * (1 + descendants(breadth, depth, 1)) == total


def test_planning_descendants_by_level() -> None:
    # (4, 3): levels of 4, 8 and 8 queries; a level-1 query has 2 children with 1 child each
    assert [descendants(4, 3, level) for level in (1, 2, 3)] == [4, 1, 0]
    # (5, 5): levels of 5, 15, 30, 30 and 30; a level-2 query has 2 children, 2 grandchildren, 2 below those
    assert descendants(5, 5, 2) == 2 + 2 + 2
