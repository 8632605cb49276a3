"""Admin: an operator can follow a running research (queries, websites, events) and find failures fast."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from research.models import (
    CollectionDocument,
    Document,
    Event,
    Extract,
    FollowUpQuestion,
    Page,
    Research,
    SerpQuery,
    Website,
)


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


@admin.register(Research)
class ResearchAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "status", "breadth", "depth", "pending_queries", "created_at", "finished_at")
    list_filter = ("status", "engine", "created_at")
    search_fields = ("title", "prompt", "owner__username", "id")
    readonly_fields = (
        "id",
        "last_event_seq",
        "pending_queries",
        "prompt_tokens",
        "completion_tokens",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
    )
    date_hierarchy = "created_at"
    inlines = [QuestionInline, QueryInline]


@admin.register(SerpQuery)
class SerpQueryAdmin(admin.ModelAdmin):
    list_display = ("query", "research", "depth", "position", "status", "pending_websites", "attempts", "created_at")
    list_filter = ("status", "depth")
    search_fields = ("query", "objective", "research__title")
    raw_id_fields = ("research", "parent")
    inlines = [WebsiteInline]


@admin.register(Website)
class WebsiteAdmin(admin.ModelAdmin):
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
    list_display = ("fact", "website", "research")
    search_fields = ("fact", "quote")
    raw_id_fields = ("research", "website")


@admin.register(FollowUpQuestion)
class FollowUpQuestionAdmin(admin.ModelAdmin):
    list_display = ("question", "research", "position")
    search_fields = ("question", "answer")
    raw_id_fields = ("research",)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("research", "kind", "created_at")
    list_filter = ("kind",)
    raw_id_fields = ("research",)


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    """The event log is a record: read-only."""

    list_display = ("research", "seq", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("research__id", "research__title")
    list_select_related = ("research",)
    readonly_fields = ("research", "seq", "type", "data", "created_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(CollectionDocument)
class CollectionDocumentAdmin(admin.ModelAdmin):
    """The local collection is written by `manage.py index_documents`; here it can be searched and pruned."""

    list_display = ("title", "path", "content_type", "size", "indexed_at")
    list_filter = ("content_type",)
    search_fields = ("title", "path")
    fields = ("title", "path", "content_type", "size", "sha256", "indexed_at", "text")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False
