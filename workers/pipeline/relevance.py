"""Whether what a research found bears on its request: a research over sources that never mention what was asked
must say so, not present their unrelated sentences as an answer.

The check reads what the report is written from: the findings and the titles of the pages they come from. They
bear on the request when they name at least FOUND_SHARE of the request's content words, stemmed ("pumps" matches
"pump"): a finding is one sentence and need not repeat its subject, but the findings of a research that found its
subject name much of what was asked, and those of one that did not name next to none of it (a question about heat
pumps over Python's documentation finds "limit" and nothing else). Words are what both engines share and cost
nothing; a language model judges meaning (a request in one language over sources in another, a paraphrase), so
with a model the report writer's own verdict, asked for with the outline, settles it whenever it gives one.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from research.text.lexical import terms

# Below this share of the request's content words named by the findings, the sources do not cover it.
FOUND_SHARE = 0.2
# Words of how a question is asked rather than of what it is about.
_ASKING = frozenset(
    terms(
        "what which how why when where who whom whose does do did is are was were can could should would will "
        "know want need like tell explain describe compare comparison difference between best good better way ways "
        "about regarding find show give list please also really say says said data detail details example examples "
        "basic basics question questions answer answers use using used"
    )
)

ON_TOPIC = "on_topic"
OFF_TOPIC = "off_topic"


@dataclass(frozen=True)
class Relevance:
    """The verdict, and what it rests on: the request's content words, those the findings name, the findings."""

    verdict: str  # ON_TOPIC or OFF_TOPIC
    terms: list[str]
    terms_found: list[str]
    findings: int
    judged_by: str  # "words", or "model" where the writer's verdict settled it

    def as_stats(self) -> dict[str, object]:
        return asdict(self)


def request_terms(prompt: str) -> list[str]:
    """The request's content words, stemmed, in the order they first appear."""
    return list(dict.fromkeys(term for term in terms(prompt) if term not in _ASKING))


def assess(
    prompt: str, findings: list[str], titles: Iterable[str] = (), model_says: bool | None = None
) -> Relevance | None:
    """The relevance to the request of the findings (each a fact and its quote, as one text) and the titles of
    their pages; None where the request has no content word to look for and no model judged it. `model_says`:
    the writer's verdict (True: the sources bear on the request), which settles it."""
    wanted = request_terms(prompt)
    named = set(terms(" ".join(findings))) | set(terms(" ".join(titles)))
    found = [term for term in wanted if term in named]
    if model_says is not None:
        return Relevance(ON_TOPIC if model_says else OFF_TOPIC, wanted, found, len(findings), "model")
    if not wanted:
        return None
    covered = bool(findings) and len(found) >= FOUND_SHARE * len(wanted)
    return Relevance(ON_TOPIC if covered else OFF_TOPIC, wanted, found, len(findings), "words")


def off_topic_note(relevance: Relevance, pages: int) -> str:
    """The report's first words when its sources do not cover the request."""
    pages_text = "The page" if pages == 1 else f"The {pages:,} pages"
    if relevance.judged_by == "model":
        why = "the report writer judged that they do not answer it"
    elif not relevance.terms_found:
        why = "their findings name none of what it asks about"
    else:
        named = ", ".join(f"“{term}”" for term in relevance.terms_found)
        why = f"their findings name only {named} of the {len(relevance.terms):,} words of what it asks about"
    return (
        f"> **The sources found do not cover this request.** {pages_text} analysed did not bear on it: {why}. "
        "What follows is what those sources say; it is not an answer to the question. Reword the request, or "
        "research it with search providers or documents that cover it."
    )
