"""Loopback fakes for everything on the internet: an OpenAI-compatible LLM, SearxNG, and a small web."""

from devtools.fakes.canary import Canary
from devtools.fakes.llm import FakeLLM
from devtools.fakes.searx import FakeSearx
from devtools.fakes.server import FakeServer, RecordedRequest
from devtools.fakes.web import FakeWeb

__all__ = ["Canary", "FakeLLM", "FakeSearx", "FakeServer", "FakeWeb", "RecordedRequest"]
