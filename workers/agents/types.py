"""The values the agents take and return, shared by the LLM agents and the extractive engine (the two engines of
workers/agents/engines.py) and by the pipeline: one module, so that neither engine imports the other for them."""

import datetime
from dataclasses import dataclass, field

# --- Queries (query_generator) ---


@dataclass(frozen=True)
class PlannedQuery:
    query: str
    objective: str


@dataclass(frozen=True)
class Ancestor:
    query: str
    objective: str
    learnings: list[str]


# --- Analysis (website_analyzer) ---


@dataclass(frozen=True)
class Finding:
    fact: str
    quote: str


# --- The report (report_writer) ---


@dataclass
class SourceNote:
    """One numbered source as the writer sees it: a page and what was extracted from it."""

    number: int
    url: str
    title: str
    findings: list[tuple[str, str]] = field(default_factory=list)  # (fact, quote)
    ids: list[int] = field(default_factory=list)  # each finding's Extract id, where the pipeline knows it
    # The page's date and standing (current, draft, archived, superseded: research/collection/standing.py), so a
    # writer can prefer the newest current figure and name an older one as what it is.
    dated: datetime.date | None = None
    standing: str = "current"


# --- Memory (memory_agent) ---


@dataclass
class MemorySource:
    """One analysed website of the branch, as the agent sees it."""

    website_id: int
    url: str
    title: str
    findings: list[tuple[str, str]] = field(default_factory=list)  # (fact, quote)
    dated: datetime.date | None = None  # the page's date and standing, as SourceNote's
    standing: str = "current"


@dataclass(frozen=True)
class KnownMemory:
    """The research's memory so far: open gaps with their ids (the agent may close them), texts of the rest."""

    gaps: list[tuple[int, str]] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Note:
    text: str
    website_ids: list[int]


@dataclass
class MemoryUpdate:
    insights: list[Note] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    contradictions: list[Note] = field(default_factory=list)
    answered_gaps: list[int] = field(default_factory=list)


# --- Ask (answer_writer): a question about a finished research ---


@dataclass
class Answer:
    """Paragraphs of sentences in the report's shape ({"text", "sources", "quotes"}); whether the sources answer
    the question ("yes", "partly", "no"); and when they do not, a web search query that would."""

    paragraphs: list[list[dict]]
    sources_answer: str
    suggested_query: str = ""


# --- Evaluation (evaluator, adaptive mode) ---


@dataclass(frozen=True)
class Learning:
    """A fact a branch learned, and the page it came from."""

    fact: str
    url: str


@dataclass(frozen=True)
class BranchEvaluation:
    score: float
    dimensions: dict[str, int]
    gaps: list[str] = field(default_factory=list)
    directions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ResearchEvaluation:
    score: float
    gaps: list[str] = field(default_factory=list)
