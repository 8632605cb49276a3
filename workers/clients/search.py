"""Search across the configured providers: SearxNG (the web), the local document collection, or both."""

from django.conf import settings

from workers.clients.searxng import SearchResult


def search(query: str, owner_id: int) -> list[SearchResult]:
    """Up to SEARCH_RESULTS_PER_QUERY distinct results, shared fairly between the providers. `owner_id`, the
    research's owner, is whose documents the local collection may give: their own and the shared ones."""
    providers = settings.SEARCH_PROVIDERS
    limit = settings.SEARCH_RESULTS_PER_QUERY
    per_provider: list[list[SearchResult]] = []
    for provider in providers:
        if provider == "searxng":
            from workers.clients import searxng

            per_provider.append(searxng.search(query, limit))
        elif provider == "local":
            from workers.clients import local_documents

            per_provider.append(local_documents.search(query, limit, owner_id))
    # Interleave, so "web + my documents" gives both a share of the seven places.
    merged: list[SearchResult] = []
    seen: set[str] = set()
    for rank in range(limit):
        for results in per_provider:
            if rank < len(results) and results[rank].url not in seen:
                seen.add(results[rank].url)
                merged.append(results[rank])
    return merged[:limit]
