"""The research tree (issue 3 fills this in)."""


def start_research(research_id: str) -> None:
    raise NotImplementedError
