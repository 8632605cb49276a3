"""The web layer: JSON API, pages, websockets, middleware. It may import every other layer; nothing imports it."""
