"""The command line: `python -m deepresearch_client start | watch | report | ask | list`.

The app's address and the token come from --url and --token, or DEEPRESEARCH_URL and DEEPRESEARCH_TOKEN."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from deepresearch_client.client import ApiError, Client, ResearchFailed

BAR_WIDTH = 30


def progress_line(status: dict[str, Any]) -> str:
    """One line for a status: a bar of queries done out of planned, pages analysed, the research's state."""
    research, progress = status["research"], status["progress"]
    planned = max(progress["queries_planned"], progress["queries_created"], 1)
    ended = progress["queries_done"] + progress["queries_failed"] + progress["queries_cancelled"]
    finished = research["status"] in ("completed", "failed", "cancelled")
    filled = BAR_WIDTH if finished else min(BAR_WIDTH - 1, BAR_WIDTH * ended // planned)
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    up_to = "" if finished else "up to "
    state = research["outcome"] or research["status"] if finished else research["status"]
    return (
        f"[{bar}] {progress['queries_done']}/{up_to}{planned} queries · "
        f"{progress['pages_analysed']} of {progress['pages_found']} pages analysed · {state}"
    )


class ProgressBar:
    """Redraws one line on a terminal; on anything else (a log, a pipe) writes a line per change."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.last = ""

    def __call__(self, status: dict[str, Any]) -> None:
        line = progress_line(status)
        if line == self.last:
            return
        self.last = line
        self.stream.write(f"\r\x1b[2K{line}" if self.live else f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.live and self.last:
            self.stream.write("\n")


def _watch(client: Client, research_id: str, stderr: TextIO) -> int:
    bar = ProgressBar(stderr)
    try:
        final = client.watch(research_id, bar)
    finally:
        bar.close()
    research = final["research"]
    if research["status"] != "completed":
        stderr.write(f"research {research['status']}: {research.get('error') or research.get('stop_reason')}\n")
        return 1
    return 0


def main(argv: list[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    parser = argparse.ArgumentParser(prog="deepresearch", description="Run and read research on a deep research app.")
    parser.add_argument("--url", default=os.environ.get("DEEPRESEARCH_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("DEEPRESEARCH_TOKEN", ""), help="or DEEPRESEARCH_TOKEN")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a research; prints its id")
    start.add_argument("prompt")
    start.add_argument("--breadth", type=int, default=2)
    start.add_argument("--depth", type=int, default=2)
    start.add_argument("--mode", choices=["fixed", "adaptive"])
    start.add_argument("--report-length", choices=["brief", "standard", "long"])
    start.add_argument("--budget-usd", type=float)
    start.add_argument("--budget-minutes", type=float)
    start.add_argument("--watch", action="store_true", help="follow it to its end with a progress bar")
    watch = commands.add_parser("watch", help="follow a research to its end with a progress bar")
    watch.add_argument("research_id")
    report = commands.add_parser("report", help="print the report (markdown), or save it as PDF or Word")
    report.add_argument("research_id")
    report.add_argument("--format", choices=["md", "pdf", "docx"], default="md")
    report.add_argument("--output", "-o", help="a file to write (needed for pdf and docx)")
    ask = commands.add_parser("ask", help="ask a finished research a question; prints the answer")
    ask.add_argument("research_id")
    ask.add_argument("question")
    listing = commands.add_parser("list", help="your researches, newest first")
    listing.add_argument("--search", default="", help="only those whose title or request holds these words")
    listing.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("a token is needed: --token or DEEPRESEARCH_TOKEN (make one on the app's API tokens page)")
    client = Client(args.url, args.token)
    try:
        return _run(client, args, stdout, stderr)
    except (ApiError, ResearchFailed, TimeoutError) as exc:
        stderr.write(f"deepresearch: {exc}\n")
        return 1


def _run(client: Client, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.command == "start":
        budget = {}
        if args.budget_usd is not None:
            budget["usd"] = args.budget_usd
        if args.budget_minutes is not None:
            budget["seconds"] = round(args.budget_minutes * 60)
        research_id = client.start(
            args.prompt,
            breadth=args.breadth,
            depth=args.depth,
            mode=args.mode,
            budget=budget or None,
            report_length=args.report_length,
        )
        stdout.write(f"{research_id}\n")
        stdout.flush()
        return _watch(client, research_id, stderr) if args.watch else 0
    if args.command == "watch":
        return _watch(client, args.research_id, stderr)
    if args.command == "report":
        if args.format != "md" and not args.output:
            stderr.write("deepresearch: --output is needed for pdf and docx\n")
            return 2
        body = client.report(args.research_id, args.format)
        if args.output:
            mode = "w" if isinstance(body, str) else "wb"
            with open(args.output, mode) as handle:
                handle.write(body)
        else:
            stdout.write(str(body))
        return 0
    if args.command == "ask":
        answer = client.ask(args.research_id, args.question)
        stdout.write(f"{answer['answer']}\n")
        return 0 if answer.get("sources_answer") is not False else 3
    rows = client.researches(args.search)
    if args.json:
        stdout.write(json.dumps(rows, indent=2) + "\n")
    for row in [] if args.json else rows:
        state = row["outcome"] or row["status"]
        stdout.write(f"{row['id']}  {row['created_at'][:10]}  {state:<11}  {row['title']}\n")
    return 0
