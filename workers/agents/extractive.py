"""The extractive engine: research without a language model.

Same functions, signatures and return shapes as the LLM agents, so the pipeline runs unchanged. Questions and
queries are built from the request's key phrases; a page's findings are its own sentences that best match the
query and objective (BM25), each quoted verbatim; the report is those sentences, grouped by objective, each citing
the page it came from. The memory's insights are a branch's findings, its gaps what the objective names that no
finding mentions, its contradictions findings of two pages on the same terms that give different figures. Nothing
in a report is written by the engine except the title and the headings: every sentence is a real document's.
An answer to a question about a finished research is the stored sentences that best match the question.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from research.collection.standing import describe, is_current
from research.record.memory import memory_key
from research.text.lexical import (
    BM25,
    counts,
    headed_sentences,
    is_content_word,
    key_phrases,
    stem,
    terms,
    weighted_terms,
    words,
)
from research.text.quotes import is_quotable
from research.text.salience import asks_about_rules, is_whole, traits, weight
from workers.agents.common import distinct
from workers.agents.types import (
    Ancestor,
    Answer,
    BranchEvaluation,
    Finding,
    KnownMemory,
    Learning,
    MemorySource,
    MemoryUpdate,
    Note,
    PlannedQuery,
    ResearchEvaluation,
    SourceNote,
)

MAX_FINDINGS = 6
# An objective naming several aspects gets two findings a page for each, up to this many.
MAX_GROUPED_FINDINGS = 10
# Long pages: the sentences past this point are not read (the collection's pages are mostly far shorter).
MAX_PAGE_CHARS = 400_000
MAX_SECTION_SENTENCES = 30
MAX_SUMMARY_SENTENCES = 5
LEFTOVER_HEADING = "Further findings"
# Older figures of draft, archived and superseded documents that a current one answers, each named superseded.
SUPERSEDED_HEADING = "Superseded figures"
MAX_SUPERSEDED = 10
# Between the aspects an objective names, when one query searches for several of the request's questions.
ASPECT_SEPARATOR = "; "

_QUESTION_TEMPLATES = [
    "Which aspects of {a} matter most to you?",
    "What do you already know about {a}, so the research can skip it?",
    "Should the research compare {a} with {b}, and on which criteria?",
    "Which version, period or setting of {a} should the research focus on?",
    "What will you use the findings about {a} for?",
    "Are there documents or sources on {a} that you trust most?",
    "How much technical detail about {a} do you want?",
    "Which examples or use cases of {a} should the report cover?",
    "Which limitations or pitfalls of {a} worry you most?",
    "Is there anything about {a} that the research should leave out?",
]
_GENERIC_TOPIC = "this topic"
# Words of the objective templates below; they say nothing about what to look for on a page.
_OBJECTIVE_WORDS = frozenset(terms("sources state context follow up statements"))
_ENUMERATION = re.compile(
    r"([\w][\w .'-]*?(?:,\s*[\w][\w .'-]*?)*,?\s+(?:or|and|vs\.?|versus)\s+[\w][\w .'-]*)", re.IGNORECASE
)
_OBJECTIVE_FORM = re.compile(r"^What the sources state about (.+?)(?: in the context of (.+?))?\.$")
_ANGLES = ["examples", "limitations", "configuration", "performance", "errors", "alternatives", "history", "design"]


def ask_questions(prompt: str, count: int, *, deadline: float | None = None) -> list[str]:
    """Exactly `count` distinct clarifying questions about the request's key phrases.

    Written at once, with no model to wait for: `deadline` (the LLM engine's) is accepted and never reached."""
    phrases = key_phrases(prompt)
    # The listed alternatives first; a lone adverb ("concurrently") is no topic to ask about.
    phrases = _facets(prompt, phrases) + [p for p in phrases if not (" " not in p and p.lower().endswith("ly"))]
    phrases = distinct(phrases) or [_GENERIC_TOPIC]
    questions: list[str] = []
    # Template by template, phrase by phrase: the first questions cover different templates on the best phrases.
    for round_ in range(len(phrases)):
        for index, template in enumerate(_QUESTION_TEMPLATES):
            a = phrases[(round_ + index) % len(phrases)]
            b = phrases[(round_ + index + 1) % len(phrases)]
            if "{b}" in template and a == b:
                continue
            questions = distinct([*questions, template.format(a=a, b=b)])
            if len(questions) >= count:
                return questions[:count]
    while len(questions) < count:
        questions.append(f"Is there anything else the research should take into account (point {len(questions) + 1})?")
    return questions[:count]


def plan_queries(
    prompt: str,
    answers: list[tuple[str, str]],
    ancestors: list[Ancestor],
    count: int,
    focus: list[str] | None = None,
) -> list[PlannedQuery]:
    """Exactly `count` distinct queries: the request's facets at the top; deeper, what the parent's learnings
    brought up that the branch has not searched for yet. What `focus` names (adaptive mode: open gaps and
    suggested directions) comes first."""
    if ancestors:
        candidates = _follow_up_candidates(prompt, ancestors, count)
    else:
        candidates = _top_level_candidates(prompt, answers, count)
    if focus:
        head = _head_phrase(ancestors[-1]) if ancestors else _subject(prompt)
        candidates = [PlannedQuery(item[:400], _objective(item, head)) for item in focus] + candidates
    planned: list[PlannedQuery] = []
    taken: set[str] = set()
    for candidate in candidates:
        key = _query_key(candidate.query)
        if key and key not in taken:
            taken.add(key)
            planned.append(candidate)
        if len(planned) == count:
            return planned
    # Few phrases: the best ones again, each from another angle; then numbered, so the count always holds.
    base = planned[0] if planned else PlannedQuery(_subject(prompt), _objective(_subject(prompt), ""))
    for index in range(count * len(_ANGLES)):
        angle = _ANGLES[index % len(_ANGLES)]
        suffix = f" {index // len(_ANGLES) + 1}" if index >= len(_ANGLES) else ""
        query = f"{base.query} {angle}{suffix}"
        if _query_key(query) not in taken:
            taken.add(_query_key(query))
            planned.append(PlannedQuery(query, f"{base.objective[:-1]}, regarding {angle}."))
        if len(planned) == count:
            break
    return planned[:count]


def _query_key(query: str) -> str:
    return " ".join(sorted(set(terms(query)))) or " ".join(query.casefold().split())


def _subject(prompt: str) -> str:
    """The request's subject: the first name it gives (a key phrase of capitalised words, not where a sentence
    starts: "Borealis Thermal Oy"), else its first key phrase in reading order. A name is what every query needs
    to stay on topic; a sentence's first words ("Due diligence on ...") are only how the request opens."""
    phrases = key_phrases(prompt)
    if not phrases:
        return " ".join(prompt.split()[:8]) or _GENERIC_TOPIC
    ordered = sorted(phrases, key=lambda p: _position(prompt, p))
    # Only in the request's opening clause: a name further on is one of the things asked about.
    opening = len(re.split(r"[:?!\n]|\.\s", prompt, maxsplit=1)[0])
    for phrase in ordered:
        position = _position(prompt, phrase)
        before = prompt[:position].rstrip()
        named = len(phrase.split()) >= 2 and all(word[:1].isupper() for word in phrase.split())
        if named and position < opening and before and before[-1] not in ".!?:;":
            return phrase
    return ordered[0]


def _position(text: str, phrase: str) -> int:
    index = text.casefold().find(phrase.casefold())
    return index if index >= 0 else len(text)


def _objective(phrase: str, context: str) -> str:
    if context and context.casefold() != phrase.casefold():
        return f"What the sources state about {phrase} in the context of {context}."
    return f"What the sources state about {phrase}."


def _facets(text: str, phrases: list[str]) -> list[str]:
    """Key phrases the request lists as alternatives ("threads, processes or asyncio"): each is an angle."""
    listed: list[str] = []
    for match in _ENUMERATION.finditer(text):
        items = re.split(r",\s*|\s+(?:or|and|vs\.?|versus)\s+", match.group(1), flags=re.IGNORECASE)
        keys = [" ".join(terms(item)) for item in items]
        for phrase in phrases:
            phrase_key = " ".join(terms(phrase))
            if phrase_key and any(key.endswith(phrase_key) or phrase_key.endswith(key) for key in keys if key):
                if phrase not in listed:
                    listed.append(phrase)
    # In the order the user wrote them: the first named usually matters most.
    return sorted(listed, key=lambda phrase: _position(text, phrase)) if len(listed) >= 2 else []


_WH = r"(?:what|which|who|whom|whose|where|when|why|how)"
_QUESTION_WORDS = rf"(?:{_WH}|is|are|was|were|does|do|did|can|could|should|would|will|has|have)"
# Where a request's questions part: sentence ends, and a comma or "and" before a question word ("..., how many
# employees does it have, where does it manufacture ...").
_CLAUSE_BREAK = re.compile(
    rf"[?!;:\n]+|\.(?:\s+|$)|,\s+(?=(?:and\s+|or\s+|but\s+)?{_WH}\b)|\s+(?:and|or)\s+(?={_WH}\b)", re.IGNORECASE
)
_QUESTION_START = re.compile(rf"^\W*(?:(?:and|or|but|also)\s+)?{_QUESTION_WORDS}\b", re.IGNORECASE)
# Inside a question, the things it asks about side by side ("its revenue and gross margin", "cash and its debt").
_COORDINATION = re.compile(r",\s+|\s+(?:and|or|as well as|plus|versus|vs\.?)\s+", re.IGNORECASE)
# A clause that says what to leave out ("skip marketing copy and internal policies") names no aspect.
_NEGATED = re.compile(
    r"^\W*(?:(?:and|but|please)\s+)?(?:skip|skipping|exclude|excluding|ignore|ignoring|leave out|not|no|without|"
    r"except|avoid|apart from|other than|don't|do not|never)\b",
    re.IGNORECASE,
)
# Words of how a question is put, not of what it asks ("how much of it comes from", "how large is").
_PHRASING = frozenset(terms("come comes coming large big small kind kinds sort type happen happens exist exists"))


def _aspects(text: str, subject: str) -> list[str]:
    """The distinct things a request asks about, in its order: each question it asks, and inside a question each
    of the things it names side by side ("revenue and gross margin" are two). Clauses before its first question
    that ask nothing ("Due diligence on X, a maker of Y, before an investment:") set its context, not an aspect;
    clauses saying what to leave out are no aspect either. Each aspect is its key phrases in reading order."""
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(text) if c and c.strip()]
    asking = [bool(_QUESTION_START.match(clause)) for clause in clauses]
    first_question = asking.index(True) if True in asking else len(clauses)
    subject_terms = set(terms(subject))
    found: list[str] = []
    keys: set[frozenset[str]] = set()
    for index, clause in enumerate(clauses):
        if (index < first_question and first_question < len(clauses) and index + 1 < len(clauses)) or (
            _NEGATED.match(clause)
        ):
            continue
        for part in _COORDINATION.split(clause):
            phrases = sorted(key_phrases(part, limit=6), key=lambda p: _position(part, p))
            kept = []
            for phrase in phrases:
                content = [w for w in phrase.split() if not set(terms(w)) <= _PHRASING | subject_terms]
                # A lone adverb ("concurrently") is how, not what.
                if content and not (len(content) == 1 and content[0].lower().endswith("ly")):
                    kept.append(" ".join(content))
            aspect = " ".join(kept)
            key = frozenset(terms(aspect))
            if key and key not in keys:
                keys.add(key)
                found.append(aspect)
    return found


def _groups(items: list[str], count: int) -> list[list[str]]:
    """`items` in `count` runs of consecutive items (or fewer, one each, when there are fewer items), as even as
    can be, the longer runs last: the first-named usually matter most, and a query of few aspects finds them
    best."""
    if count <= 0 or not items:
        return []
    if len(items) <= count:
        return [[item] for item in items]
    size, extra = divmod(len(items), count)
    groups, start = [], 0
    for index in range(count):
        length = size + (1 if index >= count - extra else 0)
        groups.append(items[start : start + length])
        start += length
    return groups


# What documents call some of the things a request asks about: officers' titles spelled out, and the common
# other names of a few business measures. A question says "CEO" or "debt"; a governance statement says "Chief
# Executive Officer", a balance sheet "term loan". Searched and matched beside the request's own words, never
# instead of them.
_RELATED = {
    "ceo": "chief executive officer managing director",
    "cfo": "chief financial officer",
    "coo": "chief operating officer",
    "cto": "chief technology officer",
    "cmo": "chief marketing officer",
    "debt": "loan borrowings",
    "employee": "headcount personnel",
    "headcount": "employees",
    "revenue": "sales turnover",
    "backlog": "order book",
    "dispute": "claim litigation arbitration",
    "lawsuit": "claim litigation",
    "churn": "cancelled cancellations",
    "manufacture": "plant production factory",
    "capacity": "output",
    "profit": "earnings result",
}


def _related(aspect: str) -> str:
    """The other names of what an aspect names (_RELATED), that the aspect does not already use."""
    own = set(terms(aspect))
    found = [_RELATED[term] for term in terms(aspect) if term in _RELATED]
    return " ".join(word for word in " ".join(distinct(found)).split() if stem(word.lower()) not in own)


def _aspect_query(aspects: list[str], subject: str) -> PlannedQuery:
    """A query for some of the request's aspects: their phrases (with their other names) and the request's subject;
    its objective names each aspect ("; " between them), so the analysis and the report can take them one by one."""
    joined = " ".join(f"{aspect} {_related(aspect)}".strip() for aspect in aspects)
    query = joined if set(terms(joined)) >= set(terms(subject)) else f"{joined} {subject}"
    return PlannedQuery(query[:400], _objective(ASPECT_SEPARATOR.join(aspects), subject))


def _objective_aspects(objective: str) -> list[str]:
    """The aspects an objective of our own form names (one, or several joined by ASPECT_SEPARATOR)."""
    match = _OBJECTIVE_FORM.match(objective.strip())
    if not match:
        return []
    return [aspect.strip() for aspect in match.group(1).split(ASPECT_SEPARATOR) if aspect.strip()]


def _top_level_candidates(prompt: str, answers: list[tuple[str, str]], count: int = 0) -> list[PlannedQuery]:
    subject = _subject(prompt)
    # The request's own questions first; what the follow-up answers add only where the breadth leaves room.
    aspects = _aspects(prompt, subject)
    if len(aspects) < count:
        seen = {frozenset(terms(a)) for a in aspects}
        for _, answer in answers:
            for aspect in _aspects(answer, subject):
                if frozenset(terms(aspect)) not in seen and len(aspects) < count:
                    seen.add(frozenset(terms(aspect)))
                    aspects.append(aspect)
    planned = [_aspect_query(group, subject) for group in _groups(aspects, count)]
    return planned + _phrase_candidates(prompt, answers)


def _phrase_candidates(prompt: str, answers: list[tuple[str, str]]) -> list[PlannedQuery]:
    request = "\n".join([prompt, *(answer for _, answer in answers if answer)])
    phrases = key_phrases(request)
    if not phrases:
        return []
    subject = _subject(prompt)
    facets = _facets(request, phrases)
    ordered = facets + [p for p in phrases if p not in facets and p != subject]
    candidates = []
    for phrase in ordered:
        shares_words = set(terms(phrase)) & set(terms(subject))
        query = phrase if shares_words else f"{phrase} {subject}"
        candidates.append(PlannedQuery(query, _objective(phrase, subject)))
    candidates.append(PlannedQuery(subject, _objective(subject, "")))
    # Then pairs of phrases, for requests with few phrases and a large breadth.
    for i, first in enumerate(ordered):
        for second in ordered[i + 1 :]:
            candidates.append(PlannedQuery(f"{first} {second}", _objective(f"{first} and {second}", subject)))
    return candidates


def _follow_up_candidates(prompt: str, ancestors: list[Ancestor], count: int = 0) -> list[PlannedQuery]:
    parent = ancestors[-1]
    # A parent that searched for several of the request's aspects at once: its children take them apart, so that
    # each aspect gets a search of its own (or of fewer companions) before anything its pages brought up.
    aspects = _objective_aspects(parent.objective)
    # A lone aspect is the parent's own search: its children follow what its pages brought up instead.
    split = _groups(aspects, count) if count and len(aspects) > 1 else []
    context = _OBJECTIVE_FORM.match(parent.objective.strip())
    subject = (context.group(2) if context and context.group(2) else "") or _subject(prompt)
    aspect_candidates = [_aspect_query(group, subject) for group in split]
    return aspect_candidates + _learned_candidates(prompt, ancestors)


def _learned_candidates(prompt: str, ancestors: list[Ancestor]) -> list[PlannedQuery]:
    parent = ancestors[-1]
    searched = set(terms(prompt))
    for ancestor in ancestors:
        searched |= set(terms(ancestor.query))
    head = _head_phrase(parent)
    learned = [set(terms(learning)) for learning in parent.learnings]
    ranked: list[tuple[int, int, str]] = []
    for order, phrase in enumerate(key_phrases("\n".join(parent.learnings), limit=60)):
        new = {t for t in terms(phrase) if t not in searched}
        if new and len(phrase) >= 3:
            # What several of the parent's findings mention is worth a query of its own; RAKE breaks ties.
            support = sum(1 for bag in learned for term in new if term in bag)
            ranked.append((-support, order, phrase))
    candidates = []
    for _, _, phrase in sorted(ranked):
        query = phrase if set(terms(phrase)) & set(terms(head)) else f"{phrase} {head}"
        candidates.append(PlannedQuery(query, _objective(phrase, head)))
    # A branch whose pages gave nothing to follow: dig into the parent's own phrases from other angles.
    for angle in _ANGLES:
        candidates.append(PlannedQuery(f"{parent.query} {angle}", _objective(head, angle)))
    return candidates


def _head_phrase(ancestor: Ancestor) -> str:
    """What a query was about: the phrase of its objective (our own form), else its first key phrase."""
    match = _OBJECTIVE_FORM.match(ancestor.objective.strip())
    if match:
        return match.group(1)
    phrases = key_phrases(ancestor.query)
    return min(phrases, key=lambda p: _position(ancestor.query, p)) if phrases else ancestor.query


def analyze(objective: str, query: str, url: str, title: str, text: str) -> list[Finding]:
    """The page's own sentences a reader would quote for the objective; each is both the fact and its quote.

    A sentence is ranked by how well it answers (BM25 over the page's sentences: a word rare on the page weighs
    more than one every sentence has), times what it carries (research/text/salience.py: figures, dates and names
    raise it; rules, instructions and boilerplate lower it, unless the objective asks about rules). Only whole
    sentences and table rows compete. An objective naming several of the request's aspects gets the best
    sentences of each in turn, so that one aspect's many matches do not crowd out another's one."""
    targets = _query_targets(objective, query)
    if not targets:
        return []
    # Only sentences that pass as quotes (research/text/quotes.py): a shorter one would be dropped anyway.
    headed: dict[str, str] = {}
    for sentence, heading in headed_sentences(text[:MAX_PAGE_CHARS]):
        if is_whole(sentence) and is_quotable(sentence):
            headed.setdefault(sentence, heading)
    candidates = list(headed)
    if not candidates:
        return []
    bags = [counts(terms(sentence)) for sentence in candidates]
    # A sentence's heading says what it is about when the sentence does not ("Open disputes" above a claim): its
    # words count for the sentence, at half the weight of its own.
    heading_bags = [counts(terms(headed[sentence])) for sentence in candidates]
    headings = BM25(heading_bags)
    # Near-duplicates are judged with the figures too: rows of one table share their headers, not their values.
    shapes = [set(bag) | set(_NUMBER.findall(sentence)) for bag, sentence in zip(bags, candidates, strict=True)]
    ranker = BM25(bags)
    rules_wanted = asks_about_rules(f"{objective} {query}")
    rankings = []
    for wanted, required in targets:
        scored = []
        for index, sentence in enumerate(candidates):
            if required and not required & (bags[index].keys() | heading_bags[index].keys()):
                continue  # context words alone are too loose a match: what the query is about must be there
            score = ranker.score(index, wanted) + 0.5 * headings.score(index, wanted)
            if score <= 0:
                continue
            # Short sentences say little even when they match well.
            score *= min(1.0, len(sentence.split()) / 10) * weight(sentence, wanted.keys(), rules_wanted)
            scored.append((score, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        rankings.append([index for _, index in scored])
    limit = min(MAX_GROUPED_FINDINGS, max(MAX_FINDINGS, 2 * len(targets)))
    chosen: list[int] = []
    for rank in range(len(candidates)):
        for ranking in rankings:
            if rank >= len(ranking) or ranking[rank] in chosen:
                continue
            index = ranking[rank]
            if any(_similar(shapes[index], shapes[other]) for other in chosen):
                continue
            chosen.append(index)
            if len(chosen) == limit:
                break
        if len(chosen) == limit:
            break
    return [Finding(candidates[i], candidates[i]) for i in chosen]


def _query_targets(objective: str, query: str) -> list[tuple[dict[str, float], set[str]]]:
    """What to look for: one (weighted terms, terms of which a finding must hold one) per aspect the objective
    names.

    With our own objective form the subject is known: its phrase must be matched, its context only counts a
    little (every query of a research shares the context). Several aspects are looked for one by one. Otherwise
    the query's words are required.
    """
    match = _OBJECTIVE_FORM.match(objective.strip())
    targets = []
    if match:
        aspects = _objective_aspects(objective)
        context = match.group(2) or ""
        for aspect in aspects:
            # The query repeats a lone aspect's words with its context; with several, it is all of them at once.
            parts = [(context, 0.3), (query, 0.6)] if len(aspects) == 1 else [(context, 0.3)]
            related = _related(aspect)
            wanted = weighted_terms(*parts, (related, 0.6), (aspect, 1.0))
            targets.append((wanted, set(terms(aspect)) | set(terms(related))))
    else:
        targets.append((weighted_terms((objective, 0.5), (query, 1.0)), set(terms(query))))
    cleaned = []
    for wanted, required in targets:
        wanted = {term: weight for term, weight in wanted.items() if term not in _OBJECTIVE_WORDS}
        if wanted:
            cleaned.append((wanted, required - _OBJECTIVE_WORDS))
    return cleaned


def _similar(a: Collection[str], b: Collection[str]) -> bool:
    keys_a, keys_b = set(a), set(b)
    union = keys_a | keys_b
    return bool(union) and len(keys_a & keys_b) / len(union) >= 0.8


@dataclass
class _Item:
    """One distinct sentence of the report with every source that gave it."""

    text: str
    quotes: dict[int, str] = field(default_factory=dict)  # source number → quote
    bag: dict[str, int] = field(default_factory=dict)
    # What the sentence's sources are, when none of them is current: "an archived document of 31 Dec 2024".
    older: str = ""
    # Said after the sentence when it is kept from such sources alone: the reader must know the figure is old.
    note: str = ""
    # The newest date of its sources (None: none is dated).
    dated: datetime.date | None = None

    def as_sentence(self) -> dict[str, Any]:
        numbers = sorted(self.quotes)
        return {
            "text": f"{self.text} {self.note}" if self.note else self.text,
            "sources": numbers,
            "quotes": [{"source": n, "quote": self.quotes[n]} for n in numbers],
        }


def _report(
    prompt: str, answers: list[tuple[str, str]], objectives: list[str], sources: list[SourceNote]
) -> dict[str, Any]:
    """The whole report in report_writer.SCHEMA's shape, which `outline` plans from: one section per objective,
    made of the extracted sentences, each citing every source it came from with its quote."""
    items = _items(sources)
    # A section per aspect the objectives name (one, or several joined by ASPECT_SEPARATOR); aspects that come
    # out under the same heading share one section.
    goals: dict[str, dict[str, float]] = {}
    for objective in objectives:
        aspects = _objective_aspects(objective)
        for aspect in aspects or [objective]:
            goal = goals.setdefault(_heading(f"What the sources state about {aspect}." if aspects else aspect), {})
            # Sections share the request's context; what tells them apart is each aspect's own words.
            for term, value in weighted_terms((_related(aspect), 0.6), (aspect, 1.0)).items():
                if term not in _OBJECTIVE_WORDS:
                    goal[term] = max(goal.get(term, 0.0), value)
    headings = [heading for heading, goal in goals.items() if goal]
    # IDF over every finding of the research: a word most findings share tells the sections apart least.
    ranker = BM25([item.bag for item in items]) if items else None
    sections_items: list[list[tuple[float, _Item]]] = [[] for _ in headings]
    leftovers: list[tuple[float, _Item]] = []
    rules_wanted = asks_about_rules(" ".join(objectives))
    for index, item in enumerate(items):
        scores = [
            ranker.score(index, goals[heading]) * weight(item.text, goals[heading].keys(), rules_wanted)
            if ranker
            else 0.0
            for heading in headings
        ]
        best = max(range(len(scores)), key=lambda i: scores[i]) if scores else -1
        if best >= 0 and scores[best] > 0:
            sections_items[best].append((scores[best], item))
        else:
            # Ranked by what they carry alone: the section keeps MAX_SECTION_SENTENCES, figures first.
            leftovers.append((weight(item.text, (), rules_wanted), item))
    sections_items, leftovers, superseded = _newest_current(sections_items, leftovers)
    sections = [_section(heading, found) for heading, found in zip(headings, sections_items, strict=True) if found]
    if leftovers:
        sections.append(_section(LEFTOVER_HEADING, leftovers))
    if superseded:
        sections.append(_section(SUPERSEDED_HEADING, superseded[:MAX_SUPERSEDED]))
    summary = _summary([found for found in sections_items if found])
    return {"title": _title(prompt), "summary": summary, "sections": sections}


def _summary(sections: list[list[tuple[float, _Item]]]) -> list[dict[str, Any]]:
    """The summary: the best sentence of each section, those that carry figures first, then the best matches, at
    most MAX_SUMMARY_SENTENCES, in the sections' order (a reader meets them again below in that order)."""
    leads = []
    for order, found in enumerate(sections):
        score, item = max(found, key=lambda pair: pair[0])
        leads.append((not traits(item.text).informative, -score, order, item))
    chosen = sorted(leads, key=lambda lead: lead[:3])[:MAX_SUMMARY_SENTENCES]
    return [item.as_sentence() for *_, item in sorted(chosen, key=lambda lead: lead[2])]


def outline(
    prompt: str, answers: list[tuple[str, str]], objectives: list[str], sources: list[SourceNote]
) -> dict[str, Any]:
    """The outline in report_writer.OUTLINE_SCHEMA's shape: the sections of the whole report (one per objective),
    each with the sources its sentences cite and, as its learnings, those sentences, which write_section takes up."""
    report = _report(prompt, answers, objectives, sources)
    sections = []
    for section in report["sections"]:
        sentences = [sentence for paragraph in section["paragraphs"] for sentence in paragraph]
        numbers = sorted({n for sentence in sentences for n in sentence["sources"]})
        learnings = [sentence["text"] for sentence in sentences]
        sections.append({"heading": section["heading"], "sources": numbers, "learnings": learnings})
    return {"title": report["title"], "summary": report["summary"], "sections": sections}


def write_section(
    prompt: str,
    heading: str,
    learnings: list[str],
    sources: list[SourceNote],
    *,
    answers: list[tuple[str, str]] | None = None,
    outline_headings: list[str] | None = None,
    words: int | None = None,
) -> dict[str, Any]:
    """One section in report_writer.SECTION_SCHEMA's shape: the outline's sentences, in its order, each citing
    every given source it came from with its quote; one paragraph per first-cited source, as in the whole report."""
    by_text = {item.text.casefold(): item for item in _items(sources)}
    found = []
    for learning in learnings:
        text = " ".join(learning.split())
        # An outdated sentence the outline kept carries its note ("(from an archived document ...)"): the same
        # sentence, said again here with it.
        noted = _OLDER_NOTE.search(text)
        item = by_text.get((text[: noted.start()] if noted else text).casefold())
        if item is not None:
            item.note = noted.group(1) if noted else ""
            found.append(item)
    return {"paragraphs": _by_first_source(found), "subsections": []}


def section_from_findings(sources: list[SourceNote]) -> dict[str, Any]:
    """The given findings as a section in report_writer.SECTION_SCHEMA's shape, without a model: each finding's
    fact a sentence citing every given source it came from with its quote, one paragraph per first-cited source.
    What the report writer falls back on for a part of a section its model could not write within its limits."""
    return {"paragraphs": _by_first_source(_items(sources)), "subsections": []}


def _items(sources: list[SourceNote]) -> list[_Item]:
    by_text: dict[str, _Item] = {}
    for source in sources:
        for fact, quote in source.findings:
            text = " ".join(fact.split())
            if not text or not quote.strip():
                continue
            key = text.casefold()
            item = by_text.get(key)
            if item is None:
                item = by_text[key] = _Item(text=text, bag=counts(terms(text)))
            item.quotes.setdefault(source.number, quote)
    by_number = {source.number: source for source in sources}
    for item in by_text.values():
        givers = [by_number[number] for number in item.quotes]
        item.dated = max((source.dated for source in givers if source.dated), default=None)
        if givers and not any(is_current(source.standing) for source in givers):
            newest = max(givers, key=lambda source: source.dated or datetime.date.min)
            item.older = _older(newest)
    return list(by_text.values())


def _older(source: SourceNote) -> str:
    """How a sentence names the kind of document it comes from: "an archived document of 31 Dec 2024"."""
    kind = f"{'an' if source.standing[:1] in 'aeiou' else 'a'} {source.standing} document"
    return f"{kind} of {describe('', source.dated)}" if source.dated else kind


def _has_figure(text: str) -> bool:
    """Whether a sentence states a figure: a number that is not only a year ("in 2025")."""
    return any(not _YEAR_ONLY.fullmatch(number) for number in _NUMBER.findall(text))


def _newest_current(
    sections: list[list[tuple[float, _Item]]], leftovers: list[tuple[float, _Item]]
) -> tuple[list[list[tuple[float, _Item]]], list[tuple[float, _Item]], list[tuple[float, _Item]]]:
    """The sections without the figures of draft, archived and superseded sources that a current source answers,
    and those figures, best first, each named superseded with the document it comes from: the report states the
    newest current figure in its section and lists the older ones apart, so a reader who met them elsewhere knows
    why they are not the answer.

    A sentence whose every source is outdated and that states a figure is dropped when its section (the aspect it
    answers) has a current sentence stating a figure, or when a current sentence stating a figure shares
    MIN_SHARED_TERMS of its words: the reader asked for the figure, and the newest current one is it. Kept
    otherwise, saying where it comes from ("(from an archived document of 31 Dec 2024)"): an old figure is
    better than none, if the reader can tell it is old. Among current sources the newest wins the same way: a
    figure of a current source dated NEWER_BY or more before another current source's figure that shares
    MIN_SHARED_TERMS of its words in the same section is dropped (last year's press release beside this year's
    handbook)."""
    everything = [item for found in [*sections, leftovers] for _, item in found]
    # Words many of the report's sentences share (the company's name) say nothing of what a sentence is about.
    frequency = counts(term for item in everything for term in item.bag)
    common = {term for term, count in frequency.items() if count > max(2, len(everything) // 5)}
    current_bags = [set(item.bag) - common for item in everything if not item.older and _has_figure(item.text)]

    superseded: list[tuple[float, _Item]] = []

    def kept(found: list[tuple[float, _Item]], answered: bool) -> list[tuple[float, _Item]]:
        newer = [item for _, item in found if not item.older and item.dated and _has_figure(item.text)]
        result = []
        for score, item in found:
            if item.older and _has_figure(item.text):
                if answered or any(len((set(item.bag) - common) & bag) >= MIN_SHARED_TERMS for bag in current_bags):
                    said = "" if item.older.startswith("a superseded") else "; superseded"
                    item.note = f"(from {item.older}{said})"
                    superseded.append((score, item))
                    continue
                item.note = f"(from {item.older})"
            elif item.dated and _has_figure(item.text) and any(_superseded_by(item, other, common) for other in newer):
                continue
            result.append((score, item))
        return result

    def has_current_figure(found: list[tuple[float, _Item]]) -> bool:
        return any(not item.older and _has_figure(item.text) for _, item in found)

    current = [kept(found, has_current_figure(found)) for found in sections]
    rest = kept(leftovers, False)
    return current, rest, sorted(superseded, key=lambda pair: -pair[0])


def _superseded_by(item: _Item, other: _Item, common: set[str]) -> bool:
    """Whether `other`, a current figure dated NEWER_BY or more after `item`, says the same thing anew."""
    if item.dated is None or other.dated is None or other.dated - item.dated < NEWER_BY:
        return False
    return len((set(item.bag) & set(other.bag)) - common) >= MIN_SHARED_TERMS


def _section(heading: str, found: list[tuple[float, _Item]]) -> dict[str, Any]:
    """Best sentences first, at most MAX_SECTION_SENTENCES; one paragraph per first-cited source, in order of
    that source's best sentence, so each paragraph reads as one document's account."""
    ranked = sorted(found, key=lambda pair: -pair[0])[:MAX_SECTION_SENTENCES]
    return {"heading": heading, "paragraphs": _by_first_source([item for _, item in ranked]), "subsections": []}


def _by_first_source(items: list[_Item]) -> list[list[dict[str, Any]]]:
    """The items as sentences, in order, in one paragraph per first-cited source (each paragraph reads as one
    document's account)."""
    paragraphs: dict[int, list[dict[str, Any]]] = {}
    for item in items:
        paragraphs.setdefault(min(item.quotes), []).append(item.as_sentence())
    return list(paragraphs.values())


def _heading(objective: str) -> str:
    """A short heading for an objective: the phrase of our own objective form, else the objective's key phrase."""
    match = _OBJECTIVE_FORM.match(objective.strip())
    text = match.group(1) if match else (key_phrases(objective, limit=1) or [objective])[0]
    text = " ".join(text.split())[:80]
    return text[:1].upper() + text[1:] if text else "Findings"


def _title(prompt: str) -> str:
    """The request's first sentence or clause, as a title of at most about 100 characters."""
    first = re.split(r"(?<=[.?!])\s|[:;\n]|\s[—–-]\s", prompt.strip(), maxsplit=1)[0].strip() or "Research report"
    if len(first) > 100:
        first = first[:100].rsplit(" ", 1)[0].rstrip(",;:-") + "…"
    if prompt.strip().endswith("?") and not first.endswith(("?", "…")):
        first = first.rstrip(".!,") + "?"
    return first[:1].upper() + first[1:]


MAX_MEMORY_INSIGHTS = 24
MAX_CONTRADICTIONS = 5
# Two findings are about the same thing when they share this many content terms besides numbers.
MIN_SHARED_TERMS = 3
# A current source this much older than another current one on the same figure is last period's word.
NEWER_BY = datetime.timedelta(days=180)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_YEAR_ONLY = re.compile(r"(?:19|20|21)\d\d")
_OLDER_NOTE = re.compile(r" (\(from an? (?:draft|archived|superseded) document[^()]*\))$")
_GAP_TEMPLATE = "What do the sources state about {phrase}?"
_GAP_FORM = re.compile(r"^What do the sources state about (.+)\?$")


def update_memory(prompt: str, objective: str, sources: list[MemorySource], known: KnownMemory) -> MemoryUpdate:
    """What a branch adds to the memory, without a model: its findings as insights, what its objective names
    that no finding mentions as gaps, and findings of two pages on the same terms with different figures as
    contradictions. Open gaps every term of which a finding mentions are answered."""
    findings = [(source.website_id, fact) for source in sources for fact, _quote in source.findings if fact.strip()]
    outdated = {source.website_id for source in sources if not is_current(source.standing)}
    bags = [set(terms(fact)) for _, fact in findings]
    insights: dict[str, Note] = {}
    for website_id, fact in findings:
        text = " ".join(fact.split())
        note = insights.get(memory_key(text))
        ids = [website_id] if note is None else sorted({*note.website_ids, website_id})
        insights[memory_key(text)] = Note(text, ids)
    match = _OBJECTIVE_FORM.match(objective.strip())
    subject = match.group(1) if match else objective
    gaps = [
        _GAP_TEMPLATE.format(phrase=phrase)
        for phrase in key_phrases(subject, limit=5)
        if _wanted(phrase) and not any(_wanted(phrase) <= bag for bag in bags)
    ]
    answered = [
        pk
        for pk, text in known.gaps
        if (wanted := _wanted(_GAP_FORM.sub(r"\1", text))) and any(wanted <= bag for bag in bags)
    ]
    update = MemoryUpdate(
        insights=list(insights.values())[:MAX_MEMORY_INSIGHTS],
        gaps=distinct(gaps),
        contradictions=_contradictions(findings, bags, outdated),
        answered_gaps=answered,
    )
    return update


def _wanted(text: str) -> set[str]:
    return set(terms(text)) - _OBJECTIVE_WORDS


def _contradictions(
    findings: list[tuple[int, str]], bags: list[set[str]], outdated: Collection[int] = ()
) -> list[Note]:
    """Pairs of findings from different pages that share content terms and each give a figure the other does not:
    the pages measured the same thing differently (or measured different things alike: the reader checks both).
    A current page and an `outdated` one (draft, archived, superseded) do not disagree: the current one is the
    newer word, and the report gives it alone."""
    numbers = [set(_NUMBER.findall(fact)) for _, fact in findings]
    found: list[Note] = []
    pairs: set[tuple[int, int]] = set()
    for i, (first_id, first) in enumerate(findings):
        for j in range(i + 1, len(findings)):
            second_id, second = findings[j]
            pair = (min(first_id, second_id), max(first_id, second_id))
            if first_id == second_id or pair in pairs or not numbers[i] or not numbers[j]:
                continue
            if (first_id in outdated) != (second_id in outdated):
                continue
            shared = bags[i] & bags[j]
            if len(shared) < MIN_SHARED_TERMS or numbers[i] <= numbers[j] or numbers[j] <= numbers[i]:
                continue
            pairs.add(pair)
            about = distinct([w for w in words(first) if is_content_word(w) and stem(w.lower()) in shared])[:4]
            text = (
                f"The sources give different figures about {' '.join(about)}: "
                f"“{' '.join(first.split())}” versus “{' '.join(second.split())}”"
            )
            found.append(Note(text, list(pair)))
            if len(found) == MAX_CONTRADICTIONS:
                return found
    return found


# The evaluator, without a model: a branch is as complete as the share of its objective's key phrases its
# learnings mention, as deep as the number of its learnings, as reliable as the number of pages they come from and
# how many phrases several pages agree on. Gaps are the phrases no learning mentions.
_FULL_LEARNINGS = 10
_FULL_SOURCES = 3


def _coverage(phrases: list[str], learnings: list[Learning]) -> tuple[list[str], list[str], int]:
    """(covered phrases, uncovered phrases, how many covered phrases two or more pages mention)."""
    bags = [(set(terms(learning.fact)), learning.url) for learning in learnings]
    covered, uncovered, agreed = [], [], 0
    for phrase in phrases:
        wanted = set(terms(phrase)) - _OBJECTIVE_WORDS
        if not wanted:
            continue
        pages = {url for bag, url in bags if wanted <= bag}
        if pages:
            covered.append(phrase)
            agreed += len(pages) >= 2
        else:
            uncovered.append(phrase)
    return covered, uncovered, agreed


def _scale(share: float) -> int:
    return max(1, min(10, round(1 + 9 * share)))


def _judge(phrases: list[str], learnings: list[Learning]) -> tuple[dict[str, int], list[str]]:
    covered, uncovered, agreed = _coverage(phrases, learnings)
    total = len(covered) + len(uncovered)
    coverage = len(covered) / total if total else (1.0 if learnings else 0.0)
    sources = len({learning.url for learning in learnings})
    agreement = agreed / len(covered) if covered else 0.0
    depth = min(1.0, len(learnings) / _FULL_LEARNINGS)
    reliability = min(1.0, sources / _FULL_SOURCES) * (0.5 + 0.5 * agreement) if learnings else 0.0
    dimensions = {
        "completeness": _scale(coverage),
        "depth": _scale(depth),
        "reliability": _scale(reliability),
        "actionability": _scale((coverage + depth) / 2),
    }
    return dimensions, uncovered


def evaluate_branch(
    prompt: str,
    answers: list[tuple[str, str]],
    query: str,
    objective: str,
    depth: int,
    round_: int,
    learnings: list[Learning],
) -> BranchEvaluation:
    """Scores from the coverage of the objective's (and query's) key phrases and the agreement of sources."""
    phrases = distinct(key_phrases(f"{objective}\n{query}", limit=12))
    dimensions, gaps = _judge(phrases, learnings)
    score = round(sum(dimensions.values()) / len(dimensions), 1)
    head = _head_phrase(Ancestor(query, objective, []))
    directions = [gap if set(terms(gap)) & set(terms(head)) else f"{gap} {head}" for gap in gaps]
    return BranchEvaluation(score, dimensions, gaps[:8], directions[:8])


def evaluate_research(
    prompt: str, answers: list[tuple[str, str]], round_: int, learnings: list[Learning]
) -> ResearchEvaluation:
    """The request's key phrases against every learning of the research."""
    request = "\n".join([prompt, *(answer for _, answer in answers if answer)])
    dimensions, gaps = _judge(distinct(key_phrases(request, limit=20)), learnings)
    return ResearchEvaluation(round(sum(dimensions.values()) / len(dimensions), 1), gaps[:8])


# --- Ask: a question about a finished research ---

MAX_ANSWER_SENTENCES = 5


def answer(question: str, prompt: str, sources: list[SourceNote]) -> Answer:
    """The sentences of the sources that match the question best (BM25), each citing every source that gave it
    with its quote, at most MAX_ANSWER_SENTENCES. A sentence counts only when it holds at least half of the
    question's terms: when none does, the sources do not answer it, and the question's key phrase is the query
    to dig deeper with."""
    wanted = {term: 1.0 for term in terms(question)}
    items = _items(sources)
    if not wanted or not items:
        return Answer([], "no", _dig_query(question, prompt))
    needed = max(1, (len(wanted) + 1) // 2)
    ranker = BM25([item.bag for item in items])
    scored = [
        (score, index)
        for index, score in enumerate(ranker.scores(wanted))
        if score > 0 and len(wanted.keys() & items[index].bag.keys()) >= needed
    ]
    if not scored:
        return Answer([], "no", _dig_query(question, prompt))
    best = [items[index] for _, index in sorted(scored, key=lambda pair: (-pair[0], pair[1]))[:MAX_ANSWER_SENTENCES]]
    for item in best:
        if item.older and _has_figure(item.text):
            item.note = f"(from {item.older})"  # an old figure, said to be old, as in the report
    covered = set().union(*(item.bag.keys() for item in best)) & wanted.keys()
    verdict = "yes" if len(covered) == len(wanted) else "partly"
    return Answer(
        [[item.as_sentence() for item in best]], verdict, "" if verdict == "yes" else _dig_query(question, prompt)
    )


def _dig_query(question: str, prompt: str) -> str:
    """A search query for what the question asks: its key phrases, in the research's context."""
    phrases = key_phrases(question, limit=3)
    subject = _subject(prompt)
    query = " ".join(phrases) or " ".join(words(question))
    if subject and subject.casefold() not in query.casefold():
        query = f"{query} {subject}"
    return query[:300]
