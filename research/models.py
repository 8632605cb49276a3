"""The research schema: a tree of queries and websites written concurrently by many workers.

Every status is an enum backed by a database check constraint, so a bad write fails loudly instead of leaving a
row no code knows how to continue. Counters (`Research.pending_queries`, `SerpQuery.pending_websites`) are only
ever changed with conditional UPDATEs inside the transaction that finishes a node: see docs/schema.md.

Default orderings name key columns (`research_id`), never a relation (`research`): ordering through a relation
joins its table, and through it the research's, into every unordered query, and a FOR UPDATE over such a query
locks the research row too. The admin lists the newest research first with orderings of its own.
"""

import uuid
from typing import Any, TypeAlias

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce


def _status_check(name: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    return models.CheckConstraint(condition=Q(status__in=choices.values), name=name)


class ResearchStatus(models.TextChoices):
    DRAFT = "draft"  # created; follow-up questions being generated
    AWAITING_ANSWERS = "awaiting_answers"
    QUEUED = "queued"
    RUNNING = "running"
    # Its top-level queries are planned and wait for its user to edit and approve them ("review_plan").
    AWAITING_REVIEW = "awaiting_review"
    REPORTING = "reporting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Outcome(models.TextChoices):
    """How a completed research ended (blank until it completes, and for a failed or cancelled one): the page's and
    the sidebar's badge. Set with the report that completes it (workers/pipeline/report.py)."""

    COMPLETE = "complete", "Completed"
    # Completed with work left: a budget or a cancel stopped it, or branches failed; its report covers the rest.
    PARTIAL = "partial", "Partial"
    # Completed with no answer: the pages it read held nothing on the request (workers/pipeline/outcome.py).
    UNANSWERED = "unanswered", "No answer found"


ACTIVE_STATUSES = (
    ResearchStatus.QUEUED,
    ResearchStatus.RUNNING,
    ResearchStatus.AWAITING_REVIEW,
    ResearchStatus.REPORTING,
)
FINISHED_STATUSES = (ResearchStatus.COMPLETED, ResearchStatus.FAILED, ResearchStatus.CANCELLED)


class ResearchMode(models.TextChoices):
    FIXED = "fixed"  # every branch goes to `depth`: exact totals
    ADAPTIVE = "adaptive"  # each branch is evaluated and goes deeper only while it needs to; `depth` is the maximum


def call_totals(research: str, prefix: str = "") -> dict[str, Coalesce]:
    """The totals of the model calls of the research that the field `research` of the outer query names, as
    annotations: `prompt_tokens`, `completion_tokens`, `cost_usd` (of the priced calls) and `unpriced_calls` (calls
    of a model with no known price: while any, its cost is unknown), each behind `prefix`. Summed over the
    research's `UsageTally` rows, a few whatever the number of its calls."""
    tallies = UsageTally.objects.filter(research_id=OuterRef(research)).order_by().values("research_id")

    def total(column: str, output: models.Field) -> Coalesce:
        summed = tallies.annotate(total=Sum(column)).values("total")[:1]
        return Coalesce(Subquery(summed), 0, output_field=output)

    return {
        f"{prefix}prompt_tokens": total("prompt_tokens", models.BigIntegerField()),
        f"{prefix}completion_tokens": total("completion_tokens", models.BigIntegerField()),
        f"{prefix}cost_usd": total("cost_usd", models.DecimalField(max_digits=16, decimal_places=6)),
        f"{prefix}unpriced_calls": total("unpriced_calls", models.IntegerField()),
    }


class ResearchQuerySet(models.QuerySet["Research"]):
    def with_usage(self) -> "ResearchQuerySet":
        """Each research with the totals of its model calls (`call_totals`), in one query."""
        return self.annotate(**call_totals("pk"))


class Research(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="researches")
    prompt = models.TextField()
    title = models.CharField(max_length=200)
    # Set by a rename: the title is then the user's, and a report written later does not replace it with its own.
    title_from_user = models.BooleanField(default=False)
    # The research waits for its user to review its top-level queries before it searches (awaiting_review).
    review_plan = models.BooleanField(default=False)
    status = models.CharField(max_length=20, choices=ResearchStatus.choices, default=ResearchStatus.DRAFT)
    num_questions = models.PositiveSmallIntegerField(default=0)
    breadth = models.PositiveSmallIntegerField(null=True, blank=True)
    depth = models.PositiveSmallIntegerField(null=True, blank=True)
    engine = models.CharField(max_length=20, default="llm", help_text="llm or extractive")
    mode = models.CharField(max_length=10, choices=ResearchMode.choices, default=ResearchMode.FIXED)
    # Adaptive mode: a branch stops on quality only from min_depth on, when its score reaches quality_threshold.
    min_depth = models.PositiveSmallIntegerField(null=True, blank=True)
    quality_threshold = models.PositiveSmallIntegerField(null=True, blank=True)
    # Rounds of gap-filling queries added by the research-level evaluation, and its last overall score.
    gap_rounds = models.PositiveSmallIntegerField(default=0)
    score = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Last event sequence number handed out, by the numbering of research/record/events.py under this row's lock:
    # no gaps.
    last_event_seq = models.PositiveIntegerField(default=0)
    # Queries planned for the whole tree (research/record/planning.py) that have not finished yet; 0 queues the report.
    pending_queries = models.IntegerField(default=0)
    # Quotes the website analyzer gave that were not in the page text, so were not stored.
    quotes_dropped = models.PositiveIntegerField(default=0)
    # What its model calls spent is not kept here: each call is a row of LlmCall, added up by the database into a
    # few UsageTally rows and summed from those when read (`Research.objects.with_usage()`,
    # research/record/usage.py), so that a call's accounting never waits on this row.
    # What the research may spend; null = no limit (defaults and maxima are settings).
    budget_seconds = models.PositiveIntegerField(null=True, blank=True)
    budget_tokens = models.BigIntegerField(null=True, blank=True)
    budget_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    # A research stopped early by a budget still completes, from what was analysed: partial, and why.
    partial = models.BooleanField(default=False)
    stop_reason = models.CharField(max_length=40, blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, blank=True, db_default="", default="")
    # How long the report should be, in words (research/control/services.py REPORT_LENGTHS): the writer gives each
    # section its share of it, and the snapshot's coverage shows the words written against it.
    report_words = models.PositiveIntegerField(default=4000)
    # The report version being written: a retried branch of a finished research writes the next one.
    report_version = models.PositiveIntegerField(default=1)
    # The first round of the research's latest run (0: its first run). A scheduled run (research/control/schedules.py)
    # searches again in a new round, fetches its pages anew (Page.run_round) and writes its report from what that
    # run found, so that an earlier run's figure is never cited as today's.
    run_round = models.PositiveSmallIntegerField(default=0, db_default=0)
    # The outline of that version's report (title, summary), planned once; its sections are ReportSection rows.
    report_outline = models.JSONField(default=dict, blank=True)
    # Lease of the research-level step in progress (start, top-level planning, report) and its claims so far:
    # the sweeper re-queues a step whose lease ran out (docs/reliability.md).
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ResearchQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "research"
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="research_owner_created"),
            models.Index(fields=["status"], name="research_status"),
        ]
        constraints = [
            _status_check("research_status_valid", ResearchStatus),
            models.CheckConstraint(
                condition=Q(breadth__isnull=True) | Q(breadth__gte=1), name="research_breadth_positive"
            ),
            models.CheckConstraint(condition=Q(depth__isnull=True) | Q(depth__gte=1), name="research_depth_positive"),
        ]

    def __str__(self) -> str:
        return self.title


class FollowUpQuestion(models.Model):
    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="questions")
    position = models.PositiveSmallIntegerField()
    question = models.TextField()
    answer = models.TextField(blank=True)

    class Meta:
        ordering = ["research_id", "position"]
        constraints = [models.UniqueConstraint(fields=["research", "position"], name="question_position_unique")]

    def __str__(self) -> str:
        return self.question

    @classmethod
    def answers_of(cls, research_id: Any) -> list[tuple[str, str]]:
        """The research's follow-up questions and their answers, in order, as every prompt that uses them holds
        them."""
        return list(cls.objects.filter(research_id=research_id).order_by("position").values_list("question", "answer"))


class QueryStatus(models.TextChoices):
    PENDING = "pending"
    SEARCHING = "searching"
    SCRAPING = "scraping"  # websites found; waiting for them to be scraped and analysed
    REVIEWING = "reviewing"  # websites all analysed or failed; memory update (and, adaptive, evaluation) under way
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SerpQuery(models.Model):
    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="queries")
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="children")
    depth = models.PositiveSmallIntegerField()
    position = models.PositiveSmallIntegerField(help_text="Index among its siblings")
    query = models.TextField()
    objective = models.TextField()
    status = models.CharField(max_length=20, choices=QueryStatus.choices, default=QueryStatus.PENDING)
    error = models.TextField(blank=True)
    learnings = models.JSONField(default=list, blank=True)
    # Websites of this query not yet analysed or failed; the update that brings it to 0 finishes the query.
    pending_websites = models.IntegerField(default=0)
    children_planned = models.BooleanField(default=False)
    # Times the user retried this query; each retry plans its children anew, after the earlier ones.
    retries = models.PositiveSmallIntegerField(default=0)
    # 0 for the initial queries; 1, 2, ... for the depth-1 branches a gap-filling round added (and their subtrees).
    round = models.PositiveSmallIntegerField(default=0)
    # The evaluator's judgement of the branch (adaptive mode): overall score 1-10, the four dimensions
    # (completeness, depth, reliability, actionability), gaps and suggested directions, and what it decided.
    score = models.FloatField(null=True, blank=True)
    dimensions = models.JSONField(default=dict, blank=True)
    gaps = models.JSONField(default=list, blank=True)
    directions = models.JSONField(default=list, blank=True)
    decision = models.CharField(max_length=10, blank=True, help_text="stop or continue")
    decision_reason = models.CharField(
        max_length=30, blank=True, help_text="threshold, diminishing_returns, max_depth or continue"
    )
    # Lease: when and by which worker the current step was claimed; `attempts` counts the sweeper's re-queues.
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["research_id", "depth", "id"]
        verbose_name = "SERP query"
        verbose_name_plural = "SERP queries"
        indexes = [models.Index(fields=["research", "status"], name="query_research_status")]
        constraints = [
            _status_check("query_status_valid", QueryStatus),
            # One child per (parent, position): planning the same children twice inserts nothing new.
            models.UniqueConstraint(
                fields=["research", "parent", "position"], name="query_position_unique", nulls_distinct=False
            ),
            models.CheckConstraint(condition=Q(depth__gte=1), name="query_depth_positive"),
        ]

    def __str__(self) -> str:
        return self.query


class PageStatus(models.TextChoices):
    FETCHING = "fetching"
    FETCHED = "fetched"
    FAILED = "failed"


class Standing(models.TextChoices):
    """Whether a document is still the current word on its subject (research/collection/standing.py decides)."""

    CURRENT = "current", "Current"
    DRAFT = "draft", "Draft"
    ARCHIVED = "archived", "Archived"
    SUPERSEDED = "superseded", "Superseded"


class Page(models.Model):
    """A URL fetched once per run of a research; every website row of that run with that URL analyses this text."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="pages")
    url = models.TextField()
    final_url = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=PageStatus.choices, default=PageStatus.FETCHING)
    title = models.TextField(blank=True)
    text = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True)
    bytes_read = models.PositiveIntegerField(default=0)
    # A collection document's date and standing, copied when it is fetched (a web page: the date its address or
    # opening gives, always current): what the writer needs to prefer the newest current figure.
    dated = models.DateField(null=True, blank=True)
    # A database default too: the scrape step inserts pages by a statement of its own (_INSERT_LEASED_PAGE).
    standing = models.CharField(
        max_length=12, choices=Standing.choices, default=Standing.CURRENT, db_default=Standing.CURRENT
    )
    failure_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    # The run that fetched it (Research.run_round then): each run of a research fetches a URL once, its own copy.
    run_round = models.PositiveSmallIntegerField(default=0, db_default=0)
    # When a worker started fetching it; a fetch that is stale (worker died) may be taken over.
    claimed_at = models.DateTimeField(null=True, blank=True)
    # The task fetching it (its claim owner): that task run again (after a lost connection, or Celery's retry)
    # takes its fetch up again instead of waiting for itself.
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    fetched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            _status_check("page_status_valid", PageStatus),
            models.UniqueConstraint(fields=["research", "url", "run_round"], name="page_url_run_unique"),
        ]

    def __str__(self) -> str:
        return self.url


class WebsiteStatus(models.TextChoices):
    PENDING = "pending"
    SCRAPING = "scraping"
    ANALYZING = "analyzing"
    ANALYZED = "analyzed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Website(models.Model):
    """One search result of one query; its page text lives in `page` (shared by equal URLs)."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="websites")
    query = models.ForeignKey(SerpQuery, on_delete=models.CASCADE, related_name="websites")
    page = models.ForeignKey(Page, on_delete=models.SET_NULL, null=True, blank=True, related_name="websites")
    position = models.PositiveSmallIntegerField()
    url = models.TextField()
    title = models.TextField(blank=True)
    snippet = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=WebsiteStatus.choices, default=WebsiteStatus.PENDING)
    failure_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True)
    # Lease: when and by which worker the current step was claimed; `attempts` counts the sweeper's re-queues.
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["query_id", "position"]
        indexes = [models.Index(fields=["research", "status"], name="website_research_status")]
        constraints = [
            _status_check("website_status_valid", WebsiteStatus),
            models.UniqueConstraint(fields=["query", "url"], name="website_query_url_unique"),
        ]

    def __str__(self) -> str:
        return self.url


class Extract(models.Model):
    """A fact the website analyzer found for the query's objective, with the verbatim quote it rests on."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="extracts")
    website = models.ForeignKey(Website, on_delete=models.CASCADE, related_name="extracts")
    position = models.PositiveSmallIntegerField()
    fact = models.TextField()
    quote = models.TextField()

    class Meta:
        ordering = ["website_id", "position"]
        constraints = [models.UniqueConstraint(fields=["website", "position"], name="extract_position_unique")]

    def __str__(self) -> str:
        return self.fact[:80]


class DocumentKind(models.TextChoices):
    REPORT = "report"
    ERROR_OUTPUT = "error_output"


class Document(models.Model):
    """A report or the error output of a research: one of each per version, enforced by the database."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="documents")
    kind = models.CharField(max_length=20, choices=DocumentKind.choices)
    # Report versions count from 1 (Research.report_version); an error output is always version 1.
    version = models.PositiveIntegerField(default=1)
    markdown = models.TextField()
    stats = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=DocumentKind.values), name="document_kind_valid"),
            models.UniqueConstraint(fields=["research", "kind", "version"], name="document_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.research_id}"


class SectionStatus(models.TextChoices):
    PENDING = "pending"
    WRITING = "writing"
    WRITTEN = "written"
    FAILED = "failed"


class ReportSection(models.Model):
    """One section of a report version, written by its own task so sections are written in parallel."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="report_sections")
    version = models.PositiveIntegerField()
    position = models.PositiveSmallIntegerField()
    title = models.CharField(max_length=200)
    # What the outline gave this section: the numbers of the sources it uses and the learnings it covers.
    plan = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=SectionStatus.choices, default=SectionStatus.PENDING)
    # The writer's structured output (rendered again, with every other section, when the report is assembled)
    # and the section rendered on its own, shown while the rest of the report is being written.
    content = models.JSONField(default=dict, blank=True)
    markdown = models.TextField(blank=True)
    # Lease, as for queries and websites: the sweeper re-queues a section whose lease ran out.
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    written_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["research_id", "version", "position"]
        constraints = [
            _status_check("section_status_valid", SectionStatus),
            models.UniqueConstraint(fields=["research", "version", "position"], name="section_position_unique"),
        ]

    def __str__(self) -> str:
        return f"section {self.position} of {self.research_id} v{self.version}"


class AnswerStatus(models.TextChoices):
    PENDING = "pending"
    WRITING = "writing"
    ANSWERED = "answered"
    FAILED = "failed"


class AskedQuestion(models.Model):
    """A question a user asked of a completed research, and its answer: written by a worker from the research's
    own findings and stored page text, every sentence cited and checked as the report's are."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="conversation")
    position = models.PositiveIntegerField()
    question = models.TextField()
    status = models.CharField(max_length=20, choices=AnswerStatus.choices, default=AnswerStatus.PENDING)
    answer = models.TextField(blank=True, help_text="The answer as markdown, with its citations and sources")
    # Whether the sources answer the question (None until answered); when they do not, a query to dig deeper with.
    sources_answer = models.BooleanField(null=True, blank=True)
    suggested_query = models.CharField(max_length=300, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Lease, as for the report's sections: the sweeper re-queues an answer whose lease ran out.
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["research_id", "position"]
        constraints = [
            _status_check("asked_question_status_valid", AnswerStatus),
            models.UniqueConstraint(fields=["research", "position"], name="asked_question_position_unique"),
        ]

    def __str__(self) -> str:
        return self.question


class EventType(models.TextChoices):
    GENERATING_FOLLOWUPS = "generating_followups"
    FOLLOWUPS_GENERATED = "followups_generated"
    RESEARCH_STARTED = "research_started"
    NEW_SERP_QUERY = "new_serp_query"
    GOT_WEBSITES = "got_websites_from_serp_query"
    SCRAPING = "scraping_a_website"
    ANALYZING = "analyzing_a_website"
    ANALYZED = "analyzed_a_website"
    WEBSITE_FAILED = "website_failed"
    SERP_QUERY_FAILED = "serp_query_failed"
    REPORT_WRITING_START = "report_writing_start"
    REPORT_WRITING_SUCCESSFUL = "report_writing_successful"
    REPORT_SECTION_WRITTEN = "report_section_written"
    RESEARCH_FAILED = "research_failed"
    RESEARCH_CANCELLED = "research_cancelled"
    BUDGET_REACHED = "budget_reached"
    QUERY_CANCELLED = "query_cancelled"
    QUERY_RETRIED = "query_retried"
    # A user dug deeper into a completed research: a branch of their own (POST /api/research/<id>/deepen).
    BRANCH_ADDED = "branch_added"
    # Review the plan: the top-level queries wait for the user, who may edit them, then approves.
    PLAN_READY = "plan_ready"
    PLAN_APPROVED = "plan_approved"
    QUERY_EVALUATED = "query_evaluated"
    MEMORY_UPDATED = "memory_updated"
    RESEARCH_EVALUATED = "research_evaluated"
    REPORT_REQUESTED = "report_requested"
    # A schedule ran a finished research again (research/control/schedules.py).
    SCHEDULED_RUN = "scheduled_run"
    # Ask: a question about a completed research (POST /api/research/<id>/ask), answered by a worker.
    ANSWER_WRITING_START = "answer_writing_start"
    ANSWER_WRITTEN = "answer_written"


class Event(models.Model):
    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="events")
    # Null from its insert to its numbering, a moment after its commit (research/record/events.py): readers ask for
    # seqs.
    seq = models.PositiveIntegerField(null=True, blank=True)
    type = models.CharField(max_length=40, choices=EventType.choices)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["research_id", "seq"]
        indexes = [models.Index(fields=["research", "id"], condition=Q(seq__isnull=True), name="event_unnumbered")]
        constraints = [
            models.UniqueConstraint(fields=["research", "seq"], name="event_seq_unique"),
            models.CheckConstraint(condition=Q(type__in=EventType.values), name="event_type_valid"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


class MemoryKind(models.TextChoices):
    INSIGHT = "insight"
    GAP = "gap"  # an open question the research has not answered yet
    CONTRADICTION = "contradiction"  # sources that disagree; rests on two or more websites


class MemoryItem(models.Model):
    """One item of a research's memory, resting on the analysed websites it names.

    Items are only ever inserted (never rewritten from a read copy), one row each, and `key` (the normalised text)
    is unique per research and kind: concurrent updates from many workers cannot lose or duplicate an item.
    """

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="memory")
    kind = models.CharField(max_length=20, choices=MemoryKind.choices)
    text = models.TextField()
    key = models.CharField(max_length=200)
    query = models.ForeignKey(SerpQuery, on_delete=models.SET_NULL, null=True, blank=True, related_name="memory")
    website_ids = models.JSONField(default=list, blank=True)
    # A gap a later branch answered is closed (kept, for the record); open gaps feed planning first.
    closed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["research_id", "kind", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=MemoryKind.values), name="memory_kind_valid"),
            models.UniqueConstraint(fields=["research", "kind", "key"], name="memory_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.text[:80]}"


class CallOutcome(models.TextChoices):
    OK = "ok"
    INVALID_OUTPUT = "invalid_output"  # answered, but not with JSON valid against the schema: asked again
    ERROR = "error"  # refused, rate-limited or failed (HTTP error, connection error)
    TIMEOUT = "timeout"


class LlmCall(models.Model):
    """One request to a language model, whatever came of it: what a research and its owner spent."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="llm_calls")
    # The research's owner, kept here so that a user's spending over a day is one indexed sum.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_calls")
    agent = models.CharField(max_length=40)
    model = models.CharField(max_length=200)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # Null when the model's price is unknown.
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    # 1 for the first request of one agent call, then counting its retries and re-asks.
    attempt = models.PositiveSmallIntegerField(default=1)
    outcome = models.CharField(max_length=20, choices=CallOutcome.choices)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["research_id", "id"]
        verbose_name = "LLM call"
        indexes = [models.Index(fields=["user", "created_at"], name="llmcall_user_created")]
        constraints = [
            models.CheckConstraint(condition=Q(outcome__in=CallOutcome.values), name="llmcall_outcome_valid")
        ]

    def __str__(self) -> str:
        return f"{self.agent} {self.model} {self.outcome}"


class UsageTally(models.Model):
    """What a research's model calls spent, added up as they are recorded: the sum of a research's tallies is the
    sum of its LlmCall rows, read in a few rows where summing the calls grew with every call (a (5,5) makes 1,300;
    its budget is read before and after each).

    The database keeps them, with a trigger on each LlmCall insert (migration 0019), whichever code inserts the call;
    calls are never updated or deleted but with their research. A call adds to the shard of the inserting
    connection (its backend pid modulo 32), so calls from different connections seldom wait on one row, and each
    waits only for the other's single-statement insert to commit."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="usage_tallies")
    shard = models.PositiveSmallIntegerField()
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    # Of the priced calls.
    cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    unpriced_calls = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["research", "shard"], name="usagetally_research_shard")]

    def __str__(self) -> str:
        return f"{self.research_id} #{self.shard}"


class DocumentOrigin(models.TextChoices):
    FOLDER = "folder", "Indexed from a folder"
    UPLOAD = "upload", "Uploaded"


class CollectionDocument(models.Model):
    """A file of the local document collection, searched by the "local" provider: indexed from a folder
    (`manage.py index_documents`) or uploaded by a user (research/collection/uploads.py).

    Who may read it (`readable_by` in research/collection/documents.py): everyone when it has no owner (the
    instance's documents) or is `shared`; otherwise its owner only, and staff. A research searches and cites only
    the documents its owner may read. Workers read a document through its signed URL, like any web page.
    `search_vector` is PostgreSQL's full-text index of it (a GIN index, created by migration 0003).
    """

    # The document's identity: the absolute path of a folder's file (indexing it again updates that row), or
    # `upload/<user id>/<sha256>/<name>` for an upload, which never starts with "/" and so never meets a path,
    # and is the same when the same user uploads the same bytes under the same name again.
    path = models.TextField(
        unique=True,
        help_text="Absolute path of the file it was indexed from, or upload/<user id>/<sha256>/<name> for an upload",
    )
    origin = models.CharField(
        max_length=10,
        choices=DocumentOrigin.choices,
        default=DocumentOrigin.FOLDER,
        help_text="Where it came from: only folder documents are removed by an indexing run",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="collection_documents",
        help_text="The user it belongs to; empty: the instance's, shared with all",
    )
    # Kept apart from the owner, so an admin can share a user's document with all and take it back: the owner
    # stays the one who may delete it.
    shared = models.BooleanField(default=False, help_text="A user's document an admin shared with all users")
    title = models.CharField(max_length=500)
    content_type = models.CharField(
        max_length=100,
        help_text="The file's type (FORMATS in research/collection/readers.py): text/html, application/pdf, ...",
    )
    text = models.TextField(help_text="The extracted text: what is searched, analysed and quoted")
    source = models.TextField(blank=True, help_text="The original markup of an HTML document, served as is")
    sha256 = models.CharField(max_length=64)
    extraction = models.PositiveIntegerField(
        default=1,
        help_text="The text extraction it was indexed with (research/collection/documents.py TEXT_EXTRACTION)",
    )
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the file")
    search_vector = SearchVectorField(null=True, blank=True, editable=False)
    # What a report needs to tell a current figure from an old one (research/collection/standing.py): the date the
    # document speaks as of, and whether it is current, a draft, archived or superseded.
    dated = models.DateField(
        null=True, blank=True, help_text="The date it speaks as of: its name's period, its opening's or metadata date"
    )
    standing = models.CharField(
        max_length=12,
        choices=Standing.choices,
        default=Standing.CURRENT,
        help_text="current, draft, archived or superseded: from its path and its opening lines",
    )
    indexed_at = models.DateTimeField()

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.title or self.path


class UnreadableFile(models.Model):
    """A file of the collection's folder that `manage.py index_documents` could not index, and why: a type no
    reader knows, a corrupt or oversized file, a file without text. Written by every indexing run, gone once the
    file is indexed or has left the folder; the admin lists them, so a skipped file is seen, not only counted."""

    path = models.TextField(unique=True, help_text="Absolute path of the file")
    reason = models.TextField(help_text="Why it was not indexed")
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the file")
    checked_at = models.DateTimeField(help_text="When an indexing run last tried it")

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path


class RateHit(models.Model):
    """One counted request of a sliding-window limit: a spending request admitted, or a failed sign-in
    (research/control/quotas.py says why in the database); rows are purged once older than their window."""

    key = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["key", "created_at"], name="ratehit_key_created")]

    def __str__(self) -> str:
        return f"{self.key} {self.created_at:%Y-%m-%d %H:%M:%S}"


class ApiToken(models.Model):
    """A personal API token: `Authorization: Bearer <token>` on the JSON API and the MCP server, as its owner.

    Only a SHA-256 digest of the secret is kept. The secret is 256 random bits, so its digest cannot be reversed by
    guessing, and a token is found by one indexed read; a slow password hash would buy nothing. Revoking deletes
    the row, so the next request with it is refused."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The secret's first characters, shown in lists so that a user can tell their tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    # A read-only token reads; anything that starts work or changes data is refused (403).
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Written at most once a minute (research/control/tokens.py), so calls do not each write the row.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class ShareLink(models.Model):
    """A read-only link to one report version of a research, for anyone holding it: the report, its sources and
    quotes, and nothing else of the owner's. The key (192 random bits) is kept as it is, so the owner can copy the
    link again from the list; revoking deletes the row, and an expired link answers like a revoked one (404)."""

    research = models.ForeignKey(Research, on_delete=models.CASCADE, related_name="shares")
    version = models.PositiveIntegerField()
    key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share of {self.research_id} v{self.version}"


class Schedule(models.Model):
    """A research run again on a schedule (research/control/schedules.py): daily, weekly, a cron line, or every so
    many seconds. Each run writes the research's next report version, with what changed since the one before; the
    webhook, when set, is called (signed with `secret`) once that version lands."""

    research = models.OneToOneField(Research, on_delete=models.CASCADE, related_name="schedule")
    every = models.CharField(max_length=100)
    webhook = models.URLField(max_length=2000, blank=True)
    # The key of the webhook's HMAC-SHA256 signature; shown to the owner, who checks the signature with it.
    secret = models.CharField(max_length=64)
    paused = models.BooleanField(default=False)
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    # What the last due time did: "started", or why it did not start a run ("running": the last run had not ended).
    last_result = models.CharField(max_length=40, blank=True)
    runs = models.PositiveIntegerField(default=0)
    # The report version the last run started is writing; the webhook is called once it is stored.
    run_version = models.PositiveIntegerField(default=0)
    # The report version the last webhook call announced, and how it answered ("200", "timeout", ...).
    notified_version = models.PositiveIntegerField(default=0)
    webhook_result = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["next_run_at"]
        indexes = [models.Index(fields=["paused", "next_run_at"], name="schedule_due")]

    def __str__(self) -> str:
        return f"{self.every} for {self.research_id}"


class ModelVerdict(models.TextChoices):
    WORKS = "works", "works"
    WORKS_WITH_SETTINGS = "works_with_settings", "works with settings"
    WILL_NOT_WORK = "will_not_work", "will not work"


class ModelCheck(models.Model):
    """One run of `manage.py check_model`: what the configured model server showed, and the verdict it earned.

    Kept so that the admin shows the last check to whoever runs the service, not only to whoever ran the command.
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    base_url = models.CharField(max_length=500)
    model_names = models.CharField(max_length=500, help_text="The models checked, comma-separated")
    verdict = models.CharField(max_length=20, choices=ModelVerdict.choices, help_text="The worst agent's verdict")
    report = models.JSONField(default=dict, help_text="Everything measured, and each agent's verdict")
    output = models.TextField(help_text="The report as the command printed it")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(verdict__in=ModelVerdict.values), name="modelcheck_verdict_valid")
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.base_url}: {self.get_verdict_display()}"


# The rows a step leases (claimed_at, claimed_by, attempts): reserved for a task, handed on by the sweeper.
StepRow: TypeAlias = Research | SerpQuery | Website | ReportSection | AskedQuestion
# What the heartbeat renews (claimed_at): a step's row, or the page that a fetch holds.
LeasedRow: TypeAlias = StepRow | Page
