"""Long pages: a page longer than one analysis prompt is analysed in parts spread over the whole page."""

import re

import pytest
from fpdf import FPDF

from devtools.fakes import FakeLLM, FakeSearx, FakeWeb
from devtools.fakes.behaviours import ResearchModel
from research.models import Extract, SerpQuery, Website, WebsiteStatus
from tests.support.factories import running_research
from workers.agents.website_analyzer import page_parts
from workers.pipeline.analyze import analyze_website
from workers.pipeline.plan import plan_queries
from workers.pipeline.scrape import scrape_website
from workers.pipeline.search import run_query

pytestmark = pytest.mark.django_db

PAGES = 60


def sentence(page: int, line: int) -> str:
    return f"On page {page} the field survey recorded {page * 37 + line} kilowatt hours in trial {line}."


def long_pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for page in range(1, PAGES + 1):
        pdf.add_page()
        pdf.multi_cell(0, 5, " ".join(sentence(page, line) for line in range(1, 21)))
    return bytes(pdf.output())


def test_page_parts_cover_the_page_and_keep_its_ends() -> None:
    text = "\n\n".join(f"Paragraph {k}. " + "word " * 200 for k in range(40))
    parts = page_parts(text, 3000, 4)
    assert len(parts) == 4
    assert parts[0].startswith("Paragraph 0.") and "Paragraph 39." in parts[-1]
    every = page_parts(text, 3000, 100)
    assert "".join(every).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    assert all(len(part) <= 3000 for part in every)


def test_a_60_page_pdf_is_analysed_in_parts_from_its_first_to_its_last_quarter(
    user, fakes, fake_web: FakeWeb, fake_searx: FakeSearx, fake_llm: FakeLLM, settings
) -> None:
    # given a search that finds one 60-page PDF, far longer than one analysis prompt
    settings.SCRAPE_PDF_MAX_PAGES = PAGES
    settings.PAGE_MAX_PARTS = 4
    settings.PAGE_TOKEN_BUDGET = 2000  # parts of about 7,000 characters: the page makes many more than four
    ResearchModel(fake_llm, facts_per_page=3).install()
    url = fake_web.add_page("/long-study.pdf", long_pdf(), content_type="application/pdf")
    fake_searx.results_for = lambda query: [url]
    research = running_research(user, breadth=1, depth=1)
    # when the research's steps run, as the workers would run them
    plan_queries(str(research.pk), None)
    run_query(SerpQuery.objects.get(research=research).pk)
    website = Website.objects.get(research=research)
    scrape_website(website.pk)
    analyze_website(website.pk)
    # then the page was analysed in PAGE_MAX_PARTS parts, and its facts come from its first and its last quarter
    website.refresh_from_db()
    assert website.status == WebsiteStatus.ANALYZED
    assert fake_llm.count("website_analysis") == 4
    quotes = Extract.objects.filter(website=website).values_list("quote", flat=True)
    pages = {int(found.group(1)) for quote in quotes if (found := re.search(r"page (\d+) ", quote))}
    assert min(pages) <= PAGES // 4 and max(pages) > 3 * PAGES // 4, sorted(pages)
    assert Extract.objects.filter(website=website).count() == 4 * 3
