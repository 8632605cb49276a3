"""Fixed latencies for the loopback fakes, and the one fake that needs a subclass to honour them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from devtools.fakes import FakeLLM, FakeSearx, FakeWeb
from devtools.fakes.server import Request


@dataclass(frozen=True)
class Latencies:
    """Seconds each external call takes; the same values drive the engine runs and the reference schedulers."""

    plan: float = 1.0  # query generator ("serp_queries"), once per parent query and once at the top
    search: float = 0.3  # SearxNG
    page: float = 0.2  # one page fetch
    analysis: float = 1.0  # website analyzer ("website_analysis"), once per page
    report: float = 2.0  # report writer ("research_report")

    @property
    def report_part(self) -> float:
        """The outline's latency, and each section's: the report is an outline, then sections written in parallel,
        each a shorter answer than a whole report, so each is given half the report's latency (the model's time
        grows with what it writes). Unlimited slots write the report in `report` seconds, as one call would."""
        return self.report / 2

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def describe(self) -> str:
        return ", ".join(f"{key} {value:g} s" for key, value in self.as_dict().items())


ZERO = Latencies(0, 0, 0, 0, 0)


class DelayedWeb(FakeWeb):
    """FakeWeb whose built-in article pages (`/page/<slug>`, what FakeSearx returns) take `page_delay` seconds.

    FakeWeb delays only pages registered one by one with `add_page`; the search results of a 110-query tree
    are not known in advance, so the delay goes on the route instead.
    """

    page_delay: float = 0.0

    def handle(self, request: Request) -> None:
        if request.record.path.startswith("/page/"):
            self.sleep(self.page_delay)
        super().handle(request)


def apply(latencies: Latencies, llm: FakeLLM, searx: FakeSearx, web: DelayedWeb) -> None:
    """Set the fakes' switches to `latencies` (handlers and results stay as installed)."""
    llm.delay = 0.0
    llm.delays = {
        "serp_queries": latencies.plan,
        "website_analysis": latencies.analysis,
        "research_report": latencies.report,
        "report_outline": latencies.report_part,
        "report_section": latencies.report_part,
    }
    searx.delay = latencies.search
    searx.delays = []
    web.page_delay = latencies.page
