"""Markdown documents (report, error output) to HTML that is safe to put in a page.

Everything in a report came from a model or a web page, so it is treated as hostile. Two layers:
- Markdown runs with raw HTML switched off: a `<script>` the model wrote comes out as the text "<script>", visible
  and inert, rather than as markup that a sanitiser would then have to strip (and the reader would never see).
- nh3 (ammonia) then keeps only an allow-list of tags and attributes: no style, no event handlers, no images or
  frames, links only to http(s) URLs, every link opening in a new tab with rel="noopener noreferrer".
"""

from urllib.parse import urlsplit

import markdown
import nh3

ALLOWED_TAGS = {
    "a",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "sup",
    "sub",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
LINK_SCHEMES = {"http", "https"}


def _keep_absolute_web_links(tag: str, attribute: str, value: str) -> str | None:
    # nh3 drops other schemes already; relative and scheme-less links would point into this app, so they go too.
    if tag == "a" and attribute == "href":
        parts = urlsplit(value.strip())
        return value if parts.scheme.lower() in LINK_SCHEMES and parts.netloc else None
    return value


def _markdown_without_raw_html() -> markdown.Markdown:
    converter = markdown.Markdown(extensions=["tables", "sane_lists"], output_format="html")
    # Raw HTML blocks and inline tags become escaped text.
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    return converter


def render_markdown(text: str) -> str:
    """Sanitised HTML for a markdown document written by a model from web pages."""
    html = _markdown_without_raw_html().convert(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep_absolute_web_links,
        url_schemes=LINK_SCHEMES,
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )
