from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic.base import RedirectView

from research.web import api, collection_views, documents, openapi, schedules, shares, tokens, views

# Every route here is in the OpenAPI document (research/web/openapi.json), and tests/test_openapi.py fails on one
# that is not.
api_patterns = [
    path("openapi.json", openapi.openapi_document, name="openapi"),
    path("research", api.research_list, name="research-list"),
    path("research/questions", api.questions, name="research-questions"),
    path("research/start", api.start, name="research-start"),
    path("research/<str:research_id>", api.research_detail, name="research-detail"),
    path("research/<str:research_id>/status", api.research_progress, name="research-status"),
    path("research/<str:research_id>/events", api.research_events, name="research-events"),
    path("research/<str:research_id>/report.md", api.report_md, name="research-report"),
    path("research/<str:research_id>/error-output.md", api.error_output_md, name="research-error-output"),
    path("research/<str:research_id>/report.html", api.report_html, name="research-report-html"),
    path(
        "research/<str:research_id>/sections/<int:position>.html",
        api.report_section_html,
        name="research-report-section-html",
    ),
    path("research/<str:research_id>/error-output.html", api.error_output_html, name="research-error-output-html"),
    path("research/<str:research_id>/report.pdf", api.report_pdf, name="research-report-pdf"),
    path("research/<str:research_id>/report.docx", api.report_docx, name="research-report-docx"),
    path("research/<str:research_id>/cancel", api.cancel, name="research-cancel"),
    path("research/<str:research_id>/report", api.report_found, name="research-report-found"),
    path("research/<str:research_id>/queries/<int:query_id>/cancel", api.query_cancel, name="query-cancel"),
    path("research/<str:research_id>/queries/<int:query_id>/retry", api.query_retry, name="query-retry"),
    path("research/<str:research_id>/deepen", api.deepen, name="deepen"),
    path("research/<str:research_id>/shares", shares.share_list, name="shares-api"),
    path("research/<str:research_id>/shares/<int:share_id>", shares.share_detail, name="share-api"),
    path("research/<str:research_id>/schedule", schedules.schedule_detail, name="schedule-api"),
    path("research/<str:research_id>/ask", api.ask_question, name="ask"),
    path("research/<str:research_id>/conversation/<int:question_id>.html", api.answer_html, name="answer-html"),
    path("research/<str:research_id>/plan", api.plan, name="plan"),
    path("research/<str:research_id>/plan/approve", api.plan_approve, name="plan-approve"),
    # With or without the trailing slash: the other endpoints have none, the documents' are documented with one.
    re_path(r"^documents/?$", documents.documents, name="documents-api"),
    re_path(r"^documents/(?P<document_id>[0-9]+)/?$", documents.document_detail, name="document-api"),
    path("tokens", tokens.token_list, name="tokens-api"),
    path("tokens/<int:token_id>", tokens.token_detail, name="token-api"),
]

# An /api/ path that matches no route answers JSON, as the rest of the API does; other paths get the 404 page.
handler404 = api.not_found

urlpatterns = [
    path("", views.home, name="home"),
    path("research/<uuid:research_id>/", views.research_page, name="research-page"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("research/img/icon.svg"))),
    path("api/", include(api_patterns)),
    # Collection documents: a report's citation (login), and the workers' signed link (no login).
    path(
        "collection/<int:document_id>/",
        collection_views.collection_document_page,
        name="collection-document-page",
    ),
    path(
        "collection/<int:document_id>/<str:signature>/",
        collection_views.collection_document,
        name="collection-document",
    ),
    path("documents/", documents.documents_page, name="documents"),
    path("documents/<int:document_id>/delete/", documents.document_delete, name="document-delete"),
    path("research/<uuid:research_id>/shares/", shares.shares_page, name="shares"),
    path("research/<uuid:research_id>/shares/<int:share_id>/revoke/", shares.share_revoke, name="share-revoke"),
    # A shared report: no sign-in (the key is the permission).
    path("share/<str:key>/", shares.shared_report, name="shared-report"),
    path("research/<uuid:research_id>/schedule/", schedules.schedule_page, name="schedule"),
    path("research/<uuid:research_id>/schedule/<str:action>/", schedules.schedule_action, name="schedule-action"),
    path("schedules/", schedules.schedules_page, name="schedules"),
    path("tokens/", tokens.tokens_page, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("accounts/signup/", views.signup, name="signup"),
    # Django's account views without password reset: no mail is set up, and its form would tell known addresses
    # (a 500 when mailing fails) from unknown ones (a redirect). Forgotten passwords are reset in the admin.
    # Throttled after repeated failures (research/control/quotas.py).
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("admin/", admin.site.urls),
]
