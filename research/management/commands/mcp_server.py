"""The MCP server over stdio, for an assistant on this machine: `python manage.py mcp_server`, its token in
DEEPRESEARCH_TOKEN. The tools are those of /mcp (research/web/mcp_server.py), calling the JSON API in this process
as the token's owner; stdout carries the protocol alone."""

import asyncio
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from research.control import tokens
from research.web.mcp_server import build_server


class Command(BaseCommand):
    help = "Serve the research tools over MCP on stdin/stdout, as the owner of the token in DEEPRESEARCH_TOKEN."

    def handle(self, *args: Any, **options: Any) -> None:
        secret = os.environ.get("DEEPRESEARCH_TOKEN", "").strip()
        if not secret:
            raise CommandError("DEEPRESEARCH_TOKEN is not set: make a token on the app's API tokens page")
        if tokens.authenticate(secret) is None:
            raise CommandError("DEEPRESEARCH_TOKEN is not a live token (unknown, revoked, or its user inactive)")
        server = build_server(authorization=f"Bearer {secret}")
        asyncio.run(server.run_stdio_async())
