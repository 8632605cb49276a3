"""Admin: an operator can follow a running research (queries, websites, events) and find failures fast."""

from datetime import timedelta
from typing import Any, cast

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import F, Q, QuerySet, Sum
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from research.models import (
    ApiToken,
    AskedQuestion,
    CollectionDocument,
    Document,
    Event,
    Extract,
    FollowUpQuestion,
    LlmCall,
    MemoryItem,
    ModelCheck,
    Page,
    Research,
    ResearchQuerySet,
    Schedule,
    SerpQuery,
    ShareLink,
    UnreadableFile,
    Website,
)
from research.record.usage import usage_of


class ListOnlyAdmin(admin.ModelAdmin):
    """Rows the app writes and the admin only lists and opens (and may delete, where deleting is how an operator
    removes one): nothing is added or changed here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class QuestionInline(ReadOnlyInline):
    model = FollowUpQuestion
    fields = ("position", "question", "answer")
    readonly_fields = fields


class ConversationInline(ReadOnlyInline):
    """The questions asked of the completed research, and how each answer went."""

    model = AskedQuestion
    fields = ("position", "question", "status", "sources_answer", "error", "created_at")
    readonly_fields = fields


class QueryInline(ReadOnlyInline):
    model = SerpQuery
    fk_name = "research"
    fields = ("depth", "position", "query", "status", "pending_websites", "error")
    readonly_fields = fields


class WebsiteInline(ReadOnlyInline):
    model = Website
    fields = ("position", "url", "status", "failure_reason", "http_status")
    readonly_fields = fields


class ExtractInline(ReadOnlyInline):
    model = Extract
    fields = ("position", "fact", "quote")
    readonly_fields = fields


class MemoryInline(ReadOnlyInline):
    """The research's memory on its page: what it learned, what is open, where sources disagree."""

    model = MemoryItem
    fields = ("kind", "text", "website_ids", "query", "closed", "created_at")
    readonly_fields = fields


@admin.register(Research)
class ResearchAdmin(admin.ModelAdmin):
    list_display = (
        "title",
        "owner",
        "status",
        "breadth",
        "depth",
        "report_words",
        "pending_queries",
        "cost",
        "tokens",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "engine", "review_plan", "created_at")
    search_fields = ("title", "prompt", "owner__username", "id")
    readonly_fields = (
        "id",
        "last_event_seq",
        "pending_queries",
        "tokens",
        "cost",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
    )
    date_hierarchy = "created_at"
    inlines = [QuestionInline, QueryInline, MemoryInline, ConversationInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Research]:
        # The totals of its model calls are summed from them (research/record/usage.py), for the list and the change
        # form.
        return cast(ResearchQuerySet, super().get_queryset(request)).with_usage()

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, research: Research) -> str:
        # A call to a model without a price makes the total a lower bound only: say so rather than under-report.
        used = usage_of(research)
        return "unknown" if used.unpriced_calls else _dollars(used.cost_usd)

    @admin.display(description="tokens", ordering="prompt_tokens")
    def tokens(self, research: Research) -> int:
        used = usage_of(research)
        return used.prompt_tokens + used.completion_tokens


@admin.register(SerpQuery)
class SerpQueryAdmin(admin.ModelAdmin):
    ordering = ("-research__created_at", "depth", "id")
    # `round`: 0 for the research's own plan, then its gap-filling rounds and the branches its user added.
    list_display = (
        "query",
        "research",
        "depth",
        "position",
        "round",
        "status",
        "pending_websites",
        "attempts",
        "created_at",
    )
    list_filter = ("status", "depth", "round")
    search_fields = ("query", "objective", "research__title")
    raw_id_fields = ("research", "parent")
    inlines = [WebsiteInline]


@admin.register(Website)
class WebsiteAdmin(admin.ModelAdmin):
    ordering = ("-research__created_at", "query_id", "position")
    list_display = ("url", "query", "status", "failure_reason", "http_status", "content_type", "attempts")
    list_filter = ("status", "failure_reason")
    search_fields = ("url", "title", "error")
    raw_id_fields = ("research", "query", "page")
    inlines = [ExtractInline]


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ("url", "research", "status", "http_status", "content_type", "bytes_read", "fetched_at")
    list_filter = ("status", "failure_reason")
    search_fields = ("url", "title")
    raw_id_fields = ("research",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Page]:
        # The list shows no page text, and a page may hold megabytes of it.
        return super().get_queryset(request).defer("text")


@admin.register(Extract)
class ExtractAdmin(admin.ModelAdmin):
    ordering = ("-research__created_at", "website_id", "position")
    list_display = ("fact", "website", "research")
    search_fields = ("fact", "quote")
    raw_id_fields = ("research", "website")


@admin.register(FollowUpQuestion)
class FollowUpQuestionAdmin(admin.ModelAdmin):
    ordering = ("-research__created_at", "position")
    list_display = ("question", "research", "position")
    search_fields = ("question", "answer")
    raw_id_fields = ("research",)


@admin.register(AskedQuestion)
class AskedQuestionAdmin(admin.ModelAdmin):
    """Questions are asked through the API and answered by a worker: read-only here, to find a failed answer."""

    ordering = ("-research__created_at", "position")
    list_display = ("question", "research", "status", "sources_answer", "created_at")
    list_filter = ("status", "sources_answer")
    search_fields = ("question", "answer", "error")
    raw_id_fields = ("research",)
    readonly_fields = [field.name for field in AskedQuestion._meta.fields]


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("research", "kind", "created_at")
    list_filter = ("kind",)
    raw_id_fields = ("research",)


@admin.register(MemoryItem)
class MemoryItemAdmin(ListOnlyAdmin):
    """Memory items are only ever inserted by the memory step (workers/pipeline/memory.py): read-only here."""

    ordering = ("-research__created_at", "kind", "id")
    list_display = ("text", "kind", "research", "closed", "website_ids", "created_at")
    list_filter = ("kind", "closed")
    search_fields = ("text", "research__id", "research__title")
    list_select_related = ("research",)
    readonly_fields = ("research", "kind", "text", "key", "query", "website_ids", "closed", "created_at")


@admin.register(Event)
class EventAdmin(ListOnlyAdmin):
    """The event log is a record: read-only."""

    ordering = ("-research__created_at", "seq")
    list_display = ("research", "seq", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("research__id", "research__title")
    list_select_related = ("research",)
    readonly_fields = ("research", "seq", "type", "data", "created_at")


@admin.register(CollectionDocument)
class CollectionDocumentAdmin(admin.ModelAdmin):
    """The local collection is written by `manage.py index_documents` and by users' uploads; here it can be
    searched and pruned, and a user's document shared with all users (and made private again)."""

    list_display = ("title", "path", "owner", "shared", "origin", "content_type", "size", "indexed_at")
    list_filter = ("origin", "shared", "content_type")
    search_fields = ("title", "path", "owner__username")
    list_select_related = ("owner",)
    fields = ("title", "path", "origin", "owner", "shared", "content_type", "size", "sha256", "indexed_at", "text")
    readonly_fields = fields
    actions = ("share_with_all", "make_private")

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Share the selected documents with all users")
    def share_with_all(self, request: HttpRequest, queryset: QuerySet[CollectionDocument]) -> None:
        # The owner stays: "make private" gives the document back to them, and they may still delete it.
        count = queryset.filter(owner__isnull=False, shared=False).update(shared=True)
        self.message_user(request, f"{count} document{'s' if count != 1 else ''} shared with all users.")

    @admin.action(description="Make the selected documents private to their owners again")
    def make_private(self, request: HttpRequest, queryset: QuerySet[CollectionDocument]) -> None:
        # Documents without an owner (index_documents without --owner) are the instance's: nobody to give them to.
        count = queryset.filter(owner__isnull=False, shared=True).update(shared=False)
        self.message_user(request, f"{count} document{'s' if count != 1 else ''} made private to their owners.")


@admin.register(UnreadableFile)
class UnreadableFileAdmin(ListOnlyAdmin):
    """The files `manage.py index_documents` could not index, and why: a record the command keeps (read-only);
    a row goes once its file is indexed or has left the folder."""

    list_display = ("path", "reason", "size", "checked_at")
    search_fields = ("path", "reason")
    fields = ("path", "reason", "size", "checked_at")
    readonly_fields = fields


@admin.register(LlmCall)
class LlmCallAdmin(ListOnlyAdmin):
    """What each model request cost and whose it was: a record, read-only."""

    ordering = ("-research__created_at", "id")
    list_display = ("created_at", "user", "research", "agent", "model", "prompt_tokens", "completion_tokens", "cost")
    list_filter = ("user", "agent", "model", "outcome", "created_at")
    search_fields = ("user__username", "research__title", "research__id", "model")
    list_select_related = ("user", "research")
    date_hierarchy = "created_at"
    fields = (
        "research",
        "user",
        "agent",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "attempt",
        "outcome",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, call: LlmCall) -> str:
        return "unknown" if call.cost_usd is None else _dollars(call.cost_usd)

    def has_delete_permission(self, request: HttpRequest, obj: LlmCall | None = None) -> bool:
        return False  # the research's usage tallies hold its calls' sums: a call goes only with its research


@admin.register(ApiToken)
class ApiTokenAdmin(ListOnlyAdmin):
    """Users' API tokens: who has which, when each was last used; an operator revokes one by deleting it. Tokens are
    made by their owners (the secret is shown to them once), never here; the digest is not shown."""

    list_display = ("name", "owner", "prefix", "read_only", "created_at", "last_used_at")
    list_filter = ("read_only",)
    search_fields = ("name", "owner__username", "prefix")
    fields = ("name", "owner", "prefix", "read_only", "created_at", "last_used_at")
    readonly_fields = fields


@admin.register(ShareLink)
class ShareLinkAdmin(ListOnlyAdmin):
    """Links that share a report version with anyone holding them; an operator revokes one by deleting it. The key
    is not shown: it is the permission to read."""

    list_display = ("research", "version", "created_at", "expires_at")
    fields = ("research", "version", "created_at", "expires_at")
    readonly_fields = fields


@admin.register(Schedule)
class ScheduleAdmin(ListOnlyAdmin):
    """Researches run again on a schedule; an operator ends one by deleting it (its owner pauses it on its page).
    The webhook's signing key is not shown."""

    list_display = ("research", "every", "paused", "next_run_at", "runs", "last_result", "webhook_result")
    list_filter = ("paused",)
    fields = ("research", "every", "webhook", "paused", "next_run_at", "last_run_at", "last_result", "runs")
    readonly_fields = fields


@admin.register(ModelCheck)
class ModelCheckAdmin(ListOnlyAdmin):
    """Runs of `manage.py check_model`, newest first: what the model server showed and each agent's verdict. A
    record: read-only (the command writes them)."""

    list_display = ("created_at", "verdict", "base_url", "model_names")
    list_filter = ("verdict",)
    fields = ("created_at", "verdict", "base_url", "model_names", "table")
    readonly_fields = fields

    @admin.display(description="report")
    def table(self, check: ModelCheck) -> str:
        # As the command printed it: a fixed-width table, verdicts and the settings block to copy.
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', check.output)


User = get_user_model()
_TOKENS = F("llm_calls__prompt_tokens") + F("llm_calls__completion_tokens")


class SpendingUserAdmin(UserAdmin):
    """Django's user admin with what each user's model calls spent, over the last 24 hours (what the daily quotas
    count) and in all; dollars are of priced calls."""

    # UserAdmin is generic only in the stubs, so it cannot be subscripted here.
    list_display = (*UserAdmin.list_display, "tokens_day", "cost_day", "tokens_total", "cost_total")  # type: ignore[misc]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        day = Q(llm_calls__created_at__gt=timezone.now() - timedelta(hours=24))
        return (
            super()
            .get_queryset(request)
            .annotate(
                spent_tokens_day=Sum(_TOKENS, filter=day, default=0),
                spent_usd_day=Sum("llm_calls__cost_usd", filter=day, default=0),
                spent_tokens=Sum(_TOKENS, default=0),
                spent_usd=Sum("llm_calls__cost_usd", default=0),
            )
        )

    @admin.display(description="tokens (24 h)", ordering="spent_tokens_day")
    def tokens_day(self, user: Any) -> int:
        return user.spent_tokens_day

    @admin.display(description="cost (24 h)", ordering="spent_usd_day")
    def cost_day(self, user: Any) -> str:
        return _dollars(user.spent_usd_day)

    @admin.display(description="tokens (all)", ordering="spent_tokens")
    def tokens_total(self, user: Any) -> int:
        return user.spent_tokens

    @admin.display(description="cost (all)", ordering="spent_usd")
    def cost_total(self, user: Any) -> str:
        return _dollars(user.spent_usd)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, SpendingUserAdmin)


def _dollars(amount: object) -> str:
    return f"${amount:.4f}"
