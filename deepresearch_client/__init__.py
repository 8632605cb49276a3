"""A small Python client for the deep research JSON API, with a command line (`python -m deepresearch_client`).

    from deepresearch_client import Client
    client = Client("https://research.example.com", token="drt_...")
    research_id = client.start("How do heat pumps perform in cold climates?", breadth=3, depth=2)
    client.watch(research_id)
    print(client.report(research_id))

It needs only `requests` (copy this folder anywhere, or run it from a checkout) and a personal API token, made on
the app's "API tokens" page."""

from deepresearch_client.client import ApiError, Client, ResearchFailed

__all__ = ["ApiError", "Client", "ResearchFailed"]
