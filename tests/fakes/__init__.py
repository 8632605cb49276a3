"""Loopback fakes for everything on the internet: an OpenAI-compatible LLM, SearxNG, and a small web."""

from tests.fakes.canary import Canary
from tests.fakes.llm import FakeLLM
from tests.fakes.searx import FakeSearx
from tests.fakes.server import FakeServer, RecordedRequest
from tests.fakes.web import FakeWeb

__all__ = ["Canary", "FakeLLM", "FakeSearx", "FakeServer", "FakeWeb", "RecordedRequest"]
