"""The page figures' one definition (research/live/figures.py): pages are distinct URLs, analysed when any of
their queries analysed them, failed when none did and one failed."""

from hypothesis import given
from hypothesis import strategies as st

from research.live.figures import PageCounts, page_counts
from research.models import WebsiteStatus

STATUSES = st.sampled_from(list(WebsiteStatus.values))
WEBSITES = st.lists(st.tuples(st.sampled_from(["https://a.test/", "https://b.test/", "https://c.test/x"]), STATUSES))


def test_a_page_found_by_several_queries_counts_once() -> None:
    websites = [
        ("https://a.test/", WebsiteStatus.ANALYZED),
        ("https://a.test/", WebsiteStatus.ANALYZED),  # the same page, analysed for a second query
        ("https://b.test/", WebsiteStatus.FAILED),
        ("https://b.test/", WebsiteStatus.FAILED),
        ("https://c.test/", WebsiteStatus.FAILED),  # failed for one query, analysed for another: analysed
        ("https://c.test/", WebsiteStatus.ANALYZED),
        ("https://d.test/", WebsiteStatus.PENDING),
    ]
    assert page_counts(websites) == PageCounts(found=4, analysed=2, failed=1)


@given(WEBSITES)
def test_analysed_and_failed_pages_never_outnumber_the_pages_found(websites) -> None:
    counts = page_counts(websites)
    urls = {url for url, _ in websites}
    analysed = {url for url, status in websites if status == WebsiteStatus.ANALYZED}
    assert counts.found == len(urls)
    assert counts.analysed == len(analysed)
    assert counts.analysed + counts.failed <= counts.found <= len(websites)
