"""Typed readers for environment variables.

A bad value stops start-up with ImproperlyConfigured naming the variable, instead of surfacing later as an
obscure failure deep inside a worker.
"""

import json
import os
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    """The value as given; set but empty stays empty."""
    return os.environ.get(name, default).strip()


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (case-insensitive); unset or empty (as in a copied .env.example) is the default."""
    value = env_str(name).lower() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_url(name: str, default: str = "", schemes: tuple[str, ...] = ("http", "https")) -> str:
    value = env_str(name, default)
    if not value:
        return ""
    parsed = urlparse(value)
    located = parsed.path if parsed.scheme == "unix" else parsed.netloc  # unix:///run/redis.sock has no host
    if parsed.scheme not in schemes or not located:
        raise ImproperlyConfigured(f"{name} must be a URL with scheme {'/'.join(schemes)}, got {value!r}")
    return value.rstrip("/")


def env_host_ports(name: str) -> frozenset[str]:
    """A comma-separated list of host:port pairs, each optionally narrowed to a path prefix, e.g.
    '127.0.0.1:8080,docs.internal:443,web:8000/collection/' (a path always ends with '/')."""
    pairs = set()
    for item in env_list(name):
        endpoint, slash, path = item.partition("/")
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in path):
            raise ImproperlyConfigured(f"{name} entries must look like host:port or host:port/path/, got {item!r}")
        prefix = f"/{path.strip('/')}/".replace("//", "/") if slash else ""
        pairs.add(f"{host.strip('[]').lower()}:{int(port)}{prefix}")
    return frozenset(pairs)


def env_prices(name: str) -> dict[str, tuple[float, float]]:
    """Model prices as JSON: {"model": {"input": dollars per million, "output": dollars per million}, ...}."""
    raw = env_str(name)
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        prices = {str(model): (float(price["input"]), float(price["output"])) for model, price in dict(table).items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise ImproperlyConfigured(
            f'{name} must be JSON like {{"model": {{"input": 0.15, "output": 0.6}}}}: {exc}'
        ) from None
    if any(price < 0 or price != price for pair in prices.values() for price in pair):
        raise ImproperlyConfigured(f"{name} prices must be non-negative numbers")
    return prices
