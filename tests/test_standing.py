"""A document's date and standing (research/collection/standing.py): from its path, its opening and its metadata."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research.collection.standing import (
    ARCHIVED,
    CURRENT,
    DRAFT,
    SUPERSEDED,
    describe,
    document_date,
    document_standing,
    path_date,
    text_date,
)

D = datetime.date


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/share/finance/annual-report-2025.pdf", D(2025, 12, 31)),
        ("/share/hr/headcount-2025-12.csv", D(2025, 12, 31)),
        ("/share/hr/headcount-2024-02.csv", D(2024, 2, 29)),
        ("/share/board/update-2025-Q1.pptx", D(2025, 3, 31)),
        ("/share/board/update-2025q3.pptx", D(2025, 9, 30)),
        ("/share/minutes/2025-03-14.md", D(2025, 3, 14)),
        ("/share/finance/fy2025-balance-sheet.xlsx", D(2025, 12, 31)),
        ("/share/2023/operations-review.odt", D(2023, 12, 31)),
        ("/share/finance/drafts/annual-report-2025-draft-v1.docx", D(2025, 12, 31)),
        ("/share/product/aurora-hx-400.html", None),
        ("/share/it/ticket-120255.txt", None),  # a number, not a year
        ("/share/policy.md", None),
    ],
)
def test_path_date_is_the_end_of_the_period_the_name_gives(path: str, expected: D | None) -> None:
    assert path_date(path) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Published 12 March 2026. This report covers 2025.", D(2026, 3, 12)),
        ("Prepared for the Board meeting of 4 February 2026", D(2026, 2, 4)),
        ("Operations handbook, updated January 2026.", D(2026, 1, 31)),
        ("Signed on March 3rd, 2025 in Helsinki", D(2025, 3, 3)),
        ("Status 2025-12-31", D(2025, 12, 31)),
        ("Figures for the financial year 2024, published in March 2025.", D(2025, 3, 31)),
        ("The 2030 target is net zero.", None),  # a bare year in text is too often a subject
        ("Due 31 February 2025", D(2025, 2, 28)),  # no such day: the month is still a date
    ],
)
def test_text_date_is_the_first_full_date(text: str, expected: D | None) -> None:
    assert text_date(text) == expected


def test_document_date_prefers_the_name_then_the_opening_then_the_metadata() -> None:
    assert document_date("/s/report-2024.pdf", "Report", "Published 12 March 2025", D(2026, 1, 15)) == D(2024, 12, 31)
    assert document_date("/s/report.pdf", "Report", "Published 12 March 2025", D(2026, 1, 15)) == D(2025, 3, 12)
    assert document_date("/s/report.pdf", "Report", "No date here.", D(2026, 1, 15)) == D(2026, 1, 15)
    assert document_date("/s/report.pdf", "Report", "No date here.") is None


@pytest.mark.parametrize(
    ("path", "title", "text", "expected"),
    [
        (
            "/s/finance/annual-report-2025.pdf",
            "Annual Report 2025",
            "Published 12 March 2026. This report "
            "covers the financial year 2025 and replaces all earlier versions and drafts.",
            CURRENT,
        ),
        ("/s/archive/price-list-2024.xlsx", "Price list 2024", "Valid 1 January to 31 December 2024", ARCHIVED),
        ("/s/old/plan.md", "Plan", "Our plan.", ARCHIVED),
        ("/s/finance/drafts/report.docx", "Report", "Figures.", DRAFT),
        ("/s/finance/report-draft.docx", "Report", "Figures.", DRAFT),
        ("/s/finance/report.docx", "DRAFT v1 - Report", "Figures.", DRAFT),
        (
            "/s/finance/report.docx",
            "Report",
            "DRAFT, SUPERSEDED: this first draft was replaced by the published report.",
            SUPERSEDED,
        ),
        (
            "/s/archive/annual-report-2024.pdf",
            "ARCHIVED - Annual Report 2024",
            "ARCHIVED DOCUMENT: it has been superseded by the Annual Report 2025.",
            SUPERSEDED,
        ),
        ("/s/archive/kpis-2024.pptx", "ARCHIVED - KPIs 2024", "ARCHIVED: see the 2025 review.", ARCHIVED),
        ("/s/legal/contracts.md", "Contracts", "We review each draft contract with the supplier.", CURRENT),
        (
            "/s/ops/plant.md",
            "Plant",
            "The old chiller has been running since 2010. " + "x " * 400 + "The unit was replaced by a heat pump.",
            CURRENT,
        ),  # past the opening: about something else
        ("/s/ops/threshold-gold.md", "Thresholds", "Limits.", CURRENT),
    ],
)
def test_standing_from_path_title_and_opening(path: str, title: str, text: str, expected: str) -> None:
    assert document_standing(path, title, text) == expected


def test_describe_names_standing_and_date() -> None:
    assert describe(ARCHIVED, D(2024, 12, 31)) == "archived, 31 Dec 2024"
    assert describe(CURRENT, D(2025, 3, 12)) == "12 Mar 2025"
    assert describe(CURRENT, None) == ""


@given(st.text(max_size=300))
def test_dates_never_fail_on_any_text(text: str) -> None:
    found = text_date(text)
    assert found is None or 1900 <= found.year <= 2199
    assert document_standing(text, text, text) in (CURRENT, DRAFT, ARCHIVED, SUPERSEDED)


@given(st.text(alphabet="0123456789-_.qQ/abcfy", max_size=40))
def test_path_dates_are_real_dates(path: str) -> None:
    found = path_date(path)
    assert found is None or 1900 <= found.year <= 2199


@given(st.dates(min_value=D(1900, 1, 1), max_value=D(2199, 12, 31)))
def test_iso_dates_in_names_and_text_read_back(date: D) -> None:
    assert path_date(f"/s/minutes-{date.isoformat()}.md") == date
    assert text_date(f"Meeting of {date.day} {date.strftime('%B')} {date.year}.") == date
