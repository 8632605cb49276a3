"""The research memory: what the research has learned so far, as insights, open gaps and contradictions."""


def remember(query_id: int) -> None:
    """Update the research memory with what the query's branch learned (run by its review, before evaluation).

    A placeholder on this branch: the memory agent that fills it in is built separately and replaces it.
    """
