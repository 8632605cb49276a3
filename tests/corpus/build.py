# ruff: noqa: E501  (hand-written prose and markup, one paragraph or element a line)
"""Writes tests/corpus/pages/*.html and annotations.json from content.py: `python tests/corpus/build.py`.

Each page is one of content.py's hand-written texts inside the furniture real sites put around it (menus,
cookie walls, share bars, related links, comments, newsletter boxes, sidebars, breadcrumbs, footers), in one
of three frames (semantic HTML5, div soup with content/post-body/entry classes, tags with no meaning at all).
The furniture's sentences are the segments an extractor must drop; the main text's sentences those it must
keep. Held-out pages (every page whose number is 2, 5 or 8 modulo 11) are never read while tuning.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from content import PAGES  # noqa: E402

HELD_OUT = {2, 5, 8}

NAV = [
    ["World News", "Business & Markets", "Science and Health", "Opinion Columns", "Subscriptions & Offers"],
    ["Getting Started", "Product Tour", "Pricing Plans", "Customer Stories", "Contact Sales"],
    ["Recipes Index", "Garden Diaries", "About This Blog", "Work With Me", "Privacy Policy"],
    ["All Categories", "Today's Deals", "Gift Cards", "Order Tracking", "Customer Service"],
]
COOKIES = [
    "We use cookies and similar technologies to personalise content and measure our audience. You can accept all cookies or manage your preferences.",
    "This website stores cookies on your device to improve your browsing experience. By clicking Accept you agree to our use of cookies.",
    "Your privacy matters to us: we and our 142 partners process personal data for advertising and analytics.",
    "We value your privacy and use cookies to analyse traffic and show relevant offers. Read our cookie policy to learn more.",
]
NEWSLETTER = [
    "Get the best stories of the week delivered to your inbox every Friday morning.",
    "Sign up for our newsletter and receive a ten percent discount on your first order.",
    "Never miss a post: join 12,000 readers who get new articles by email.",
    "Stay informed with our free daily briefing, sent at seven every morning.",
]
SHARE = [
    ["Share on Facebook", "Share on X", "Share via Email", "Copy link to article"],
    ["Tweet this story", "Post to LinkedIn", "Send on WhatsApp"],
]
RELATED = [
    "Ten surprising facts about the history of the bicycle",
    "Mayor announces new plan for affordable housing downtown",
    "Why sleep matters more than you think for your memory",
    "The best budget laptops for students this autumn",
    "Five easy weeknight dinners you can cook in twenty minutes",
    "How to choose the right running shoes for flat feet",
    "Inside the race to build cheaper solar panels",
    "Expert tips for negotiating a better salary this year",
]
POPULAR = [
    "Celebrity chef opens restaurant in converted lighthouse",
    "Quiz: how well do you know the capitals of Europe?",
    "Storm warning issued for the coast this weekend",
    "Local bakery wins national award for its rye bread",
]
COMMENTS = [
    "Great article, thanks for sharing this with us!",
    "I completely disagree with the conclusion here, the numbers tell a different story.",
    "Does anyone know where I can find the original study mentioned above?",
    "This happened in my town too and nobody seemed to care at the time.",
    "Bookmarked for later, really useful overview of the topic.",
    "The author forgot to mention the cost for ordinary families.",
]
FOOTER = [
    "Copyright 2024 Meridian Media Group. All rights reserved.",
    "Registered office: 14 Harbour Street, company number 0845521.",
    "Terms of Use | Privacy Notice | Accessibility Statement | Careers",
]
AUTHOR = "About the author: writes about everyday life, travel and technology, and lives with two cats by the sea."
SITE = ["The Daily Meridian", "Northwind Docs", "Crumbs & Roots", "ShopRight Online"]


def esc(text: str) -> str:
    return html.escape(text, quote=False)


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s) >= 20]


def main_html(
    kind: str, title: str, paragraphs: list[str], extras: dict, i: int, div_soup: bool
) -> tuple[str, list[str]]:
    """The main content's markup, with the boilerplate inside it (share bars, bylines, edit links) and its drops."""
    p = "".join(f"<p>{esc(t)}</p>\n" for t in paragraphs)
    drops: list[str] = []
    inner = ""
    if "list" in extras:
        inner += "<ul>" + "".join(f"<li>{esc(x)}</li>" for x in extras["list"]) + "</ul>\n"
    if "table" in extras:
        rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in extras["table"])
        inner += f'<table class="specs">{rows}</table>\n'
    if "code" in extras:
        inner += f"<pre><code>{esc(extras['code'])}</code></pre>\n"
    share = SHARE[i % 2]
    share_html = (
        '<div class="share-bar">' + "".join(f'<a href="#s{n}">{esc(s)}</a> ' for n, s in enumerate(share)) + "</div>"
    )
    if kind == "news":
        byline = f"By Anna Keller, Staff Reporter | Updated {i % 28 + 1} March 2024, 14:{i % 60:02d}"
        drops += [*share[:2], "Anna Keller, Staff Reporter"]
        half = len(paragraphs) // 2 + 1
        ad = '<div class="ad-slot">Advertisement - Continue reading below</div>'
        drops.append("Advertisement - Continue reading below")
        body = (
            "".join(f"<p>{esc(t)}</p>\n" for t in paragraphs[:half])
            + ad
            + "".join(f"<p>{esc(t)}</p>\n" for t in paragraphs[half:])
        )
        return (
            f'<h1>{esc(title)}</h1><div class="byline">{esc(byline)}</div>{share_html}\n<div class="{"story-body" if div_soup else "article-body"}">{body}{inner}</div>',
            drops,
        )
    if kind == "blog":
        drops += [AUTHOR, *share[:2]]
        cls = ["entry-content", "post-body", "entry"][i % 3]
        return (
            f'<h1 class="entry-title">{esc(title)}</h1><div class="post-meta">Posted on June {i % 28 + 1}, 2023 by Mira in Life</div>'
            f'<div class="{cls}">{p}{inner}</div>{share_html}<div class="author-box">{esc(AUTHOR)}</div>'
        ), drops
    if kind == "docs":
        drops += ["Was this page helpful? Yes No", "Edit this page on GitHub", "Next: Troubleshooting common errors"]
        return (
            f'<h1>{esc(title)}</h1>{p}{inner}<div class="feedback">Was this page helpful? <button>Yes</button> <button>No</button></div>'
            f'<div class="page-footer"><a href="#edit">Edit this page on GitHub</a> <a href="#next">Next: Troubleshooting common errors</a></div>'
        ), drops
    if kind == "forum":
        posts = [paragraphs, *[[r] for r in extras.get("replies", [])]]
        users = ["greenthumb77", "tinkerer_j", "OldHand", "marta.v"]
        out = f"<h1>{esc(title)}</h1>"
        for n, texts in enumerate(posts):
            code = f"<pre>{esc(extras['code'])}</pre>" if n == 1 and "code" in extras else ""
            sig = "Sent from my phone, please excuse typos." if n % 2 == 0 else "Member since 2011 | 4,302 posts"
            out += (
                f'<div class="post" id="p{n}"><div class="post-author"><a href="#u">{users[n % 4]}</a> Joined: Mar 2019</div>'
                f'<div class="post-content">'
                + "".join(f"<p>{esc(t)}</p>" for t in texts)
                + code
                + f'</div><div class="signature">{esc(sig)}</div><div class="post-actions"><a href="#r">Reply</a> <a href="#q">Quote</a> <a href="#rep">Report post</a></div></div>\n'
            )
        drops += ["Sent from my phone, please excuse typos.", "Member since 2011 | 4,302 posts", "Report post"]
        return out, drops
    if kind == "shop":
        drops += [
            "Add to basket",
            "Free delivery on orders over 50 euros",
            "Customers who bought this item also bought",
        ]
        also = "".join(
            f'<div class="product-tile"><a href="#t{n}">{esc(t)}</a><span>€{19 + n}.99</span></div>'
            for n, t in enumerate(
                ["Stainless steel lunch box with two compartments", "Silicone stretch lids, set of six"]
            )
        )
        drops += ["Stainless steel lunch box with two compartments"]
        return (
            f'<h1 class="product-title">{esc(title)}</h1><div class="price">€{29 + i}.95</div>'
            f'<div class="buy-box"><button>Add to basket</button><p>Free delivery on orders over 50 euros</p></div>'
            f'<div class="product-description"><h2>Description</h2>{p}{inner}</div>'
            f'<div class="cross-sell"><h3>Customers who bought this item also bought</h3>{also}</div>'
        ), drops
    # wiki
    drops += ["This page was last edited on", "Categories: Articles with short description", "Jump to navigation"]
    toc = '<div id="toc" class="toc"><h2>Contents</h2><ul><li>1 Overview</li><li>2 History</li><li>3 See also</li><li>4 References</li></ul></div>'
    edit = '<span class="mw-editsection">[<a href="#e">edit</a>]</span>'
    refs = (
        "<h2>References"
        + edit
        + '</h2><ol class="references"><li>Smith, J. (1998). Regional survey report, volume 2.</li><li>National statistics office yearbook, 2021 edition.</li></ol>'
    )
    drops += ["Smith, J. (1998). Regional survey report, volume 2."]
    return (
        f'<a class="mw-jump" href="#content">Jump to navigation</a><h1 id="firstHeading">{esc(title)}</h1>'
        f'<div id="bodyContent"><div class="shortdescription">From the free encyclopedia</div>{inner if "table" in extras else ""}'
        f"<p>{esc(paragraphs[0])}</p>{toc}<h2>Overview{edit}</h2>"
        + "".join(f"<p>{esc(t)}</p>" for t in paragraphs[1:])
        + (inner if "table" not in extras else "")
        + refs
        + '<div id="catlinks">Categories: Articles with short description | Pages using infobox</div></div>'
        '<div class="printfooter">This page was last edited on 3 May 2024, at 09:12.</div>'
    ), drops


def frame(style: int, i: int, title: str, main: str) -> tuple[str, list[str]]:
    """The page around the main content; returns the page and the furniture's drop segments."""
    nav, cookie, news, related = NAV[i % 4], COOKIES[i % 4], NEWSLETTER[i % 4], [RELATED[(i + k) % 8] for k in range(4)]
    comments = [COMMENTS[(i + k) % 6] for k in range(3)]
    site = SITE[i % 4]
    drops = [*nav[:3], cookie, news, *related, *comments, *POPULAR[:2], *FOOTER[:2], "Home › "]
    nav_links = "".join(f'<li><a href="/c/{n}">{esc(x)}</a></li>' for n, x in enumerate(nav))
    related_links = "".join(f'<li><a href="/r/{n}">{esc(x)}</a></li>' for n, x in enumerate(related))
    popular = "".join(f'<li><a href="/p/{n}">{esc(x)}</a></li>' for n, x in enumerate(POPULAR))
    comment_html = "".join(
        f'<li class="comment"><b>reader{n}</b> <span>2 days ago</span><p>{esc(c)}</p></li>'
        for n, c in enumerate(comments)
    )
    footer = "".join(f"<p>{esc(x)}</p>" for x in FOOTER)
    crumbs = f"Home › {esc(title.split()[0])} › Article"
    head = f"<head><meta charset='utf-8'><title>{esc(title)} | {esc(site)}</title><script>window.dataLayer=[];var msg='tracking script text';</script><style>.x{{color:red}}</style></head>"
    if style == 0:  # semantic HTML5
        return (
            f"<!DOCTYPE html><html lang='en'>{head}<body>"
            f'<div id="cookie-banner" class="cookie-banner"><p>{esc(cookie)}</p><button>Accept all</button><button>Settings</button></div>'
            f'<header><a class="logo" href="/">{esc(site)}</a><nav><ul>{nav_links}</ul></nav><form role="search"><input name="q"></form></header>'
            f'<nav class="breadcrumbs">{crumbs}</nav>'
            f"<main><article>{main}</article>"
            f'<section class="comments"><h2>3 Comments</h2><ol>{comment_html}</ol><h3>Leave a Reply</h3><form><textarea></textarea></form></section>'
            f'<section class="related"><h2>Related articles</h2><ul>{related_links}</ul></section></main>'
            f'<aside class="sidebar"><h3>Most popular</h3><ul>{popular}</ul><div class="newsletter"><p>{esc(news)}</p><input type="email"><button>Subscribe</button></div></aside>'
            f"<footer>{footer}</footer></body></html>"
        ), drops
    if style == 1:  # div soup with meaningful class names
        return (
            f"<html>{head}<body><div id='wrapper'>"
            f'<div class="gdpr-box" id="privacy-popup"><div class="txt">{esc(cookie)}</div><a href="#ok">I agree</a> <a href="#no">Reject</a></div>'
            f'<div class="header"><div class="logo"><a href="/">{esc(site)}</a></div><div class="menu"><ul>{nav_links}</ul></div></div>'
            f'<div class="breadcrumb">{crumbs}</div>'
            f'<div class="container"><div class="content">{main}'
            f'<div class="related-posts"><h4>You may also like</h4><ul>{related_links}</ul></div>'
            f'<div id="comments" class="comments-area"><h3>Comments</h3><ol class="comment-list">{comment_html}</ol></div></div>'
            f'<div class="sidebar" id="sidebar"><div class="widget"><h4>Popular now</h4><ul>{popular}</ul></div>'
            f'<div class="widget newsletter-signup"><p>{esc(news)}</p><input type="email"><a href="#sub">Sign me up</a></div></div></div>'
            f'<div class="footer" id="footer">{footer}</div></div></body></html>'
        ), drops
    # style 2: no semantic tags, no meaningful class names (an old table layout)
    return (
        f"<html>{head}<body>"
        f'<div class="x9" style="position:fixed;bottom:0">{esc(cookie)} <a href="#ok">OK</a></div>'
        f'<table width="100%"><tr><td colspan="2" class="t1"><b>{esc(site)}</b> | '
        + " | ".join(f'<a href="/c/{n}">{esc(x)}</a>' for n, x in enumerate(nav))
        + "</td></tr>"
        '<tr><td class="t2" width="200" valign="top"><div class="b1"><b>Most read</b><br>'
        + "<br>".join(f'<a href="/p/{n}">{esc(x)}</a>' for n, x in enumerate(POPULAR))
        + "</div>"
        f'<div class="b2">{esc(news)}<br><input type="email"></div></td>'
        f'<td class="t3" valign="top"><div class="c1"><span class="c0">{crumbs}</span>{main}</div>'
        f'<div class="c2"><b>See also</b><br>'
        + "<br>".join(f'<a href="/r/{n}">{esc(x)}</a>' for n, x in enumerate(related))
        + "</div>"
        f'<div class="c3"><b>Reader comments</b>{comment_html.replace("<li", "<div").replace("</li>", "</div>")}</div></td></tr>'
        f'<tr><td colspan="2" class="t4">{footer}</td></tr></table></body></html>'
    ), drops


def build() -> dict:
    annotations = {}
    out = HERE / "pages"
    out.mkdir(exist_ok=True)
    for i, (kind, title, paragraphs, extras) in enumerate(PAGES):
        style = i % 3
        main, inner_drops = main_html(kind, title, paragraphs, extras, i, div_soup=style != 0)
        page, drops = frame(style, i, title, main)
        texts = [*paragraphs, *extras.get("replies", [])]
        keep = [s for t in texts for s in sentences(t)] + [x for x in extras.get("list", []) if len(x) >= 20]
        name = f"{i:02d}-{kind}.html"
        (out / name).write_text(page)
        main_joined = " ".join(texts + extras.get("list", []))
        drops = [d for d in dict.fromkeys(inner_drops + drops) if d not in main_joined]
        annotations[name] = {
            "kind": kind,
            "frame": ["semantic", "div-soup", "no-semantics"][style],
            "part": "held-out" if i % 11 in HELD_OUT else "dev",
            "keep": keep,
            "drop": drops,
        }
    (HERE / "annotations.json").write_text(json.dumps(annotations, indent=1, ensure_ascii=False) + "\n")
    return annotations


if __name__ == "__main__":
    found = build()
    print(len(found), "pages,", sum(a["part"] == "held-out" for a in found.values()), "held out")
