"""Ask, offline: the extractive engine's answer (workers/agents/extractive.py `answer`) and the sources the ask step
gives it (workers/pipeline/ask.py `relevant_sources`), as properties over generated sources and questions. The
end-to-end check on the demo collection is in tests/test_offline_research.py."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research.models import Extract, Page, PageStatus, QueryStatus, Research, ResearchStatus, SerpQuery, Website
from research.text.lexical import sentences, terms
from research.text.quotes import PageText
from workers.agents import extractive
from workers.agents.report_writer import SourceNote
from workers.pipeline import ask

# Two vocabularies with no term in common: what the sources are about, and what they never mention.
TOPIC = ["thread", "queue", "lock", "asyncio", "event", "loop", "pool", "future", "result", "timeout", "socket"]
ELSEWHERE = ["heat", "pump", "winter", "compressor", "defrost", "radiator", "insulation", "tariff"]
FILLER = ["the", "a", "of", "and", "is", "in", "with", "for", "when"]


def sentence_of(vocabulary: list[str], min_words: int = 1) -> st.SearchStrategy[str]:
    """A sentence of words from the vocabulary and function words, sometimes with odd spacing."""
    word = st.one_of(st.sampled_from(vocabulary), st.sampled_from(FILLER))
    spacing = st.sampled_from([" ", " ", " ", "  ", "\n"])
    return st.lists(st.tuples(word, spacing), min_size=min_words, max_size=10).map(
        lambda pairs: "".join(w + s for w, s in pairs).strip().capitalize() + "."
    )


@st.composite
def source_notes(draw, vocabulary: list[str] = TOPIC) -> list[SourceNote]:
    """Numbered sources as the ask step gives them, numbers not necessarily 1..n, each with findings whose quote is
    the fact itself, another sentence, or blank (a finding with no quote, which cannot be cited)."""
    numbers = draw(st.lists(st.integers(1, 60), unique=True, max_size=6))
    notes = []
    for number in numbers:
        findings = []
        for fact in draw(st.lists(sentence_of(vocabulary), max_size=5)):
            quote = draw(st.one_of(st.just(fact), sentence_of(vocabulary), st.just(""), st.just("   ")))
            findings.append((fact, quote))
        notes.append(SourceNote(number, f"https://example.org/{number}", f"Page {number}", findings))
    return notes


def question_of(vocabulary: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(vocabulary + FILLER), min_size=1, max_size=6).map(
        lambda words: " ".join(words).capitalize() + "?"
    )


# Enough generated cases to find a wrong citation or verdict, few enough to keep the module to seconds.
QUICK = settings(max_examples=60, deadline=None)


def plain(text: str) -> str:
    return " ".join(text.split()).casefold()


@QUICK
@given(question=question_of(TOPIC), sources=source_notes())
def test_an_extractive_answer_cites_only_what_it_was_given_with_the_findings_own_quotes(question, sources) -> None:
    result = extractive.answer(question, "How do Python programs run work concurrently?", sources)
    by_number = {source.number: source for source in sources}
    sentences_given = [sentence for paragraph in result.paragraphs for sentence in paragraph]
    assert len(sentences_given) <= extractive.MAX_ANSWER_SENTENCES
    for sentence in sentences_given:
        # every sentence is a finding's fact, citing only sources it was given, each with that source's own quote
        assert sentence["sources"] and set(sentence["sources"]) <= set(by_number)
        assert [quote["source"] for quote in sentence["quotes"]] == sentence["sources"]
        for quote in sentence["quotes"]:
            quotes_of_that_fact = {
                q for fact, q in by_number[quote["source"]].findings if plain(fact) == plain(sentence["text"])
            }
            assert quote["quote"] in quotes_of_that_fact and quote["quote"].strip()
    assert len({plain(s["text"]) for s in sentences_given}) == len(sentences_given)  # no sentence twice


@QUICK
@given(question=question_of(TOPIC), sources=source_notes())
def test_an_extractive_answer_says_no_exactly_when_no_finding_holds_half_the_question(question, sources) -> None:
    result = extractive.answer(question, "How do Python programs run work concurrently?", sources)
    wanted = set(terms(question))
    needed = max(1, (len(wanted) + 1) // 2)
    citable = [fact for source in sources for fact, quote in source.findings if fact.strip() and quote.strip()]
    answerable = any(len(wanted & set(terms(fact))) >= needed for fact in citable)
    assert result.sources_answer in ("yes", "partly", "no")
    assert (result.sources_answer == "no") == (not answerable or not wanted)
    assert (result.paragraphs == []) == (result.sources_answer == "no")
    # a query to dig deeper with whenever the sources fall short, none when they answer it whole
    assert (result.suggested_query == "") == (result.sources_answer == "yes")
    chosen = [sentence["text"] for paragraph in result.paragraphs for sentence in paragraph]
    for text in chosen:
        assert len(wanted & set(terms(text))) >= needed, text
    covered = set().union(*(set(terms(text)) for text in chosen)) & wanted if chosen else set()
    assert (result.sources_answer == "yes") == (bool(chosen) and covered == wanted)


@QUICK
@given(question=question_of(ELSEWHERE).filter(lambda q: bool(terms(q))), sources=source_notes())
def test_an_extractive_answer_to_a_question_sharing_no_term_with_the_sources_is_no(question, sources) -> None:
    result = extractive.answer(question, "How do Python programs run work concurrently?", sources)
    assert result.sources_answer == "no" and result.paragraphs == []
    assert result.suggested_query and len(result.suggested_query) <= 300
    # the query asks for what the question names, not for what the sources hold
    assert set(terms(result.suggested_query)) & set(terms(question))


# --- relevant_sources: what the ask step gives the engine --------------------------------------------------------


@st.composite
def analysed_pages(draw) -> list[tuple[str, list[tuple[str, str]]]]:
    """Pages as a research stores them: each its text and its findings, mostly its own sentences as the
    extractive analysis makes them, sometimes a fact in other words quoting one of its sentences."""
    pages = []
    for _ in range(draw(st.integers(1, 8))):
        said = draw(st.lists(sentence_of(TOPIC, min_words=4), min_size=1, max_size=8))
        text = " ".join(said)
        findings = []
        for index in draw(st.lists(st.integers(0, len(said) - 1), max_size=4)):
            fact = draw(st.one_of(st.just(said[index]), sentence_of(TOPIC)))
            findings.append((fact, said[index]))
        pages.append((text, findings))
    return pages


def store(owner, pages: list[tuple[str, list[tuple[str, str]]]], tag: str) -> Research:
    research = Research.objects.create(owner=owner, prompt="p", title="t", status=ResearchStatus.COMPLETED)
    query = SerpQuery.objects.create(
        research=research, depth=1, position=0, query="q", objective="o", status=QueryStatus.DONE
    )
    for position, (text, findings) in enumerate(pages):
        url = f"https://{tag}.example/{position}"
        page = Page.objects.create(research=research, url=url, status=PageStatus.FETCHED, text=text)
        website = Website.objects.create(
            research=research, query=query, page=page, position=position, url=url, title=f"{tag} {position}"
        )
        Extract.objects.bulk_create(
            Extract(research=research, website=website, position=i, fact=fact, quote=quote)
            for i, (fact, quote) in enumerate(findings)
        )
    return research


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pages=analysed_pages(), question=question_of(TOPIC))
def test_relevant_sources_are_this_researchs_pages_with_their_findings_and_sentences(user, pages, question) -> None:
    # given a research, and another one (of another user's, say) holding the same words
    research = store(user, pages, "mine")
    store(user, pages, "theirs")
    # when the sources for a question are gathered
    notes, _ = ask.relevant_sources(research.pk, question)
    # then they are numbered from 1, one per page, every one a page of this research that has findings
    assert [note.number for note in notes] == list(range(1, len(notes) + 1))
    stored = {f"https://mine.example/{i}": page for i, page in enumerate(pages)}
    assert len({note.url for note in notes}) == len(notes)
    assert all(note.url in stored and stored[note.url][1] for note in notes)
    # each finding is one of that page's own, or a sentence of its stored text quoting itself (a passage)
    extracts = passages = 0
    for rank, note in enumerate(notes):
        text, findings = stored[note.url]
        for finding in note.findings:
            if finding in findings:
                extracts += 1
                continue
            fact, quote = finding
            passages += 1
            assert fact == quote and PageText(text).contains(quote), finding
            assert quote in {" ".join(s.split()) for s in sentences(text)}
            assert rank < ask.MAX_PASSAGE_PAGES  # passages come from the best pages only
    assert extracts <= ask.MAX_FINDINGS and passages <= ask.MAX_PASSAGES
    # and a research with few findings gives the engine all of them, whatever the question matched
    if terms(question) and sum(len(findings) for _, findings in pages) <= ask.MAX_FINDINGS:
        every = {(url, finding) for url, (_, findings) in stored.items() for finding in findings}
        assert every <= {(note.url, finding) for note in notes for finding in note.findings}
    # with the page of the best-matching finding first
    wanted = set(terms(question))
    if notes and any(wanted & set(terms(f"{fact} {quote}")) for _, findings in pages for fact, quote in findings):
        first = stored[notes[0].url][1]
        assert any(wanted & set(terms(f"{fact} {quote}")) for fact, quote in first)


@pytest.mark.django_db
def test_relevant_sources_of_a_question_without_a_content_word_are_none(user) -> None:
    research = store(user, [("The thread pool is in the queue. A lock is in the loop.", [("Thread pool.", "x")])], "m")
    assert ask.relevant_sources(research.pk, "How and why, and what of it?")[0] == []
    assert len(ask.relevant_sources(research.pk, "Which thread pool?")[0]) == 1


def test_the_vocabularies_are_told_apart_by_terms() -> None:
    # what the generated questions rely on: each word a term of its own, the two vocabularies sharing none, and the
    # function words none at all
    assert set(terms(" ".join(TOPIC))) == set(TOPIC) and set(terms(" ".join(ELSEWHERE))) == set(ELSEWHERE)
    assert not set(TOPIC) & set(ELSEWHERE) and terms(" ".join(FILLER)) == []
