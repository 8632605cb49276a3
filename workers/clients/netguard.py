"""SSRF guard for every outgoing page fetch: only public addresses, unless an endpoint is allow-listed.

Approach: a `requests` transport adapter whose urllib3 connections resolve the host once with
`socket.getaddrinfo`, vet every resolved address with `ipaddress`, and then connect to a vetted address
literal. The hostname is never parsed by us (the C resolver decides what `2130706433`, `0x7f000001` or
`127.1` mean and we judge the address it produced), and because the socket goes to the address we vetted,
DNS rebinding cannot swap it between check and connect. The urllib3 connection keeps the hostname, so the
Host header, TLS SNI and certificate verification are all unchanged. Redirects are not followed here; the
caller makes one request per hop and each new connection passes through the same check.

Why not a library: none fits both the policy and the stack.
- `advocate` (the classic) requires urllib3 < 2 and has had no release since 2020.
- `requests-hardened` (Saleor) uses the same resolve-and-pin idea, but its only escape hatch is "allow
  every loopback address", which would also open Flower, Redis and any other local service to a fetched
  URL; it also vets only the first resolved address and lets IPv4-compatible IPv6 (`::127.0.0.1`) through.
- Microsoft `antissrf` 1.0 allow-lists by CIDR only, adds an `X-Forwarded-For` header by default and
  drops the port from the Host header.
- `ssrfguard` pins at connect time too, but is a 0.x single-author release whose allow-lists are a cross
  product of networks and ports rather than specific endpoints.
We need exactly one exception shape: named `host:port` endpoints (a local document server, the test
fakes), nothing wider. That is a few dozen lines on top of urllib3's own connection class.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from requests.utils import select_proxy
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    LocationParseError,
    NameResolutionError,
    NewConnectionError,
)
from urllib3.util import parse_url
from urllib3.util.connection import create_connection

from workers.clients.deadline import call_within
from workers.errors import DeadlineExceeded

log = logging.getLogger(__name__)

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Seconds a name lookup may take when the connection has no connect timeout of its own.
DNS_TIMEOUT = 10.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Ranges that `is_global` lets through on some Python versions, or that carry another address inside them
# (6to4, NAT64, Teredo, IPv4-compatible IPv6) and so could reach a private IPv4 host through a gateway.
_EXTRA_BLOCKED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "100.64.0.0/10",  # CGNAT: routable inside the provider's network, not the internet
        "192.0.0.0/24",
        "192.88.99.0/24",
        "198.18.0.0/15",
        "::/96",  # IPv4-compatible IPv6, deprecated
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "2001::/32",
        "2002::/16",
        "5f00::/16",
        "fec0::/10",
    )
)


class BlockedURLError(ValueError):
    """The URL is refused before any connection: `reason` is `bad_scheme` or `bad_url`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class BlockedAddressError(Exception):
    """A connection would reach a non-public address that is not allow-listed.

    Deliberately not an OSError: urllib3 wraps and retries OSErrors, while this must reach the caller as is.
    """

    def __init__(self, host: str, port: int, address: str) -> None:
        super().__init__(host, port, address)
        self.host = host
        self.port = port
        self.address = address

    def __str__(self) -> str:
        return f"{endpoint_key(self.host, self.port)} resolves to non-public address {self.address}"


def is_public_address(ip: IPAddress) -> bool:
    """True when `ip` is a globally routable unicast address that no special range claims."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        # ::ffff:a.b.c.d is the IPv4 host a.b.c.d as far as the kernel is concerned.
        return is_public_address(ip.ipv4_mapped)
    if not ip.is_global:
        return False
    # is_global alone misses some of these on older Pythons (multicast is "global" in 3.11).
    if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return False
    return not any(ip.version == net.version and ip in net for net in _EXTRA_BLOCKED)


def _is_address(host: str) -> bool:
    """True when `host` (as urllib3 passes it: an IPv6 address without brackets) is an IP address, not a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def endpoint_key(host: str, port: int) -> str:
    """The allow-list spelling of an endpoint: lower-case host, IPv6 in brackets, explicit port."""
    host = host.strip().lower().rstrip(".")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def normalize_allowed(entries: Iterable[str]) -> frozenset[str]:
    """Validate and normalize `host:port` allow-list entries (ValueError on a malformed one)."""
    out: set[str] = set()
    for entry in entries:
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"allowed endpoint {entry!r} is not host:port")
        out.add(endpoint_key(host.strip("[]"), int(port)))
    return frozenset(out)


def check_url(url: str) -> None:
    """Refuse URLs that no fetch should attempt: other schemes, embedded credentials, no host.

    Parsed with urllib3's `parse_url`, the same parser `requests` uses, so both read the URL alike.
    """
    try:
        parsed = parse_url(url)
    except LocationParseError as exc:
        raise BlockedURLError("bad_url", f"unparseable URL: {exc}") from exc
    if not parsed.scheme:
        raise BlockedURLError("bad_url", "URL has no scheme")
    if parsed.scheme.lower() not in ALLOWED_SCHEMES:
        raise BlockedURLError("bad_scheme", f"scheme {parsed.scheme!r} is not http or https")
    if parsed.auth is not None:
        raise BlockedURLError("bad_url", "URL carries credentials")
    if not parsed.host:
        raise BlockedURLError("bad_url", "URL has no host")


class _OpensThroughGuard:
    """A connection that opens its socket through `open_socket` (GuardedAdapter._open_socket), set by its pool."""

    open_socket: Callable[[Any], socket.socket]

    def _new_conn(self) -> socket.socket:
        return self.open_socket(self)


class _GuardedPool:
    """A pool whose connections open their socket through `open_socket`. The classes are made once: made per
    adapter, around its method, they cost more CPU than the rest of a fetch's connection set-up."""

    def __init__(self, *args: Any, open_socket: Callable[[Any], socket.socket], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_socket = open_socket

    def _new_conn(self) -> Any:
        conn: Any = super()._new_conn()  # type: ignore[misc]  # the pool class's, which makes a guarded connection
        conn.open_socket = self.open_socket
        return conn


class _GuardedHTTPConnection(_OpensThroughGuard, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_OpensThroughGuard, HTTPSConnection):
    pass


class _GuardedHTTPConnectionPool(_GuardedPool, HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSConnectionPool(_GuardedPool, HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    """An HTTPAdapter that only connects to public addresses, or to the allow-listed `host:port` endpoints.

    Mount it for both `http://` and `https://` on a session with `trust_env = False`; proxies are refused
    because a proxy would resolve the target itself, out of reach of the check.
    """

    def __init__(self, allowed_private: Iterable[str] = frozenset(), **kwargs: Any) -> None:
        self.allowed_private = normalize_allowed(allowed_private)
        # Every connection this adapter opened, so `abort()` can cut them when a deadline passes.
        self._connections: list[HTTPConnection] = []
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block=block, **pool_kwargs)
        # urllib3 makes a pool by calling its class with the host, the port and its keywords.
        self.poolmanager.pool_classes_by_scheme = {
            "http": functools.partial(_GuardedHTTPConnectionPool, open_socket=self._open_socket),
            "https": functools.partial(_GuardedHTTPSConnectionPool, open_socket=self._open_socket),
        }

    def send(
        self,
        request: PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> Response:
        if proxies and request.url and select_proxy(request.url, proxies):
            raise BlockedURLError("bad_url", "proxies cannot be used with the SSRF guard")
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies)

    def abort(self) -> None:
        """Shut down every socket this adapter opened, waking any thread blocked reading from one."""
        for conn in list(self._connections):
            sock = conn.sock
            if sock is None:
                continue
            # Already closed by the peer or the pool is fine. The plain socket-level shutdown, because
            # SSLSocket.shutdown would also drop its SSL object under the reading thread's feet.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _open_socket(self, conn: HTTPConnection) -> socket.socket:
        """Resolve once, vet every address, connect to a vetted one; mirrors urllib3's own `_new_conn`."""
        host, port = conn.host, int(conn.port)  # urllib3 fills in the scheme's default port
        # The C resolver takes no timeout, and one that never answers would hold this thread for good: the
        # lookup gets the connect timeout (a ConnectTimeoutError, which the fetch reports as `timeout`).
        lookup_timeout = conn.timeout if isinstance(conn.timeout, int | float) else DNS_TIMEOUT
        try:
            # Every family, even one this host cannot reach: what is vetted must not depend on the machine.
            if _is_address(host):
                # An address needs no resolver (AI_NUMERICHOST only parses it), so it cannot hang: no thread.
                infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
            else:
                infos = call_within(
                    lambda: socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM),
                    lookup_timeout,
                    f"DNS lookup of {host}",
                )
        except socket.gaierror as exc:
            raise NameResolutionError(host, conn, exc) from exc
        except DeadlineExceeded as exc:
            raise ConnectTimeoutError(
                conn, f"DNS lookup of {host} timed out. (connect timeout={lookup_timeout})"
            ) from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if endpoint_key(host, port) not in self.allowed_private:
            for address in addresses:
                # One bad answer refuses the name: a mix of public and private records is how rebinding looks.
                if not is_public_address(ipaddress.ip_address(address)):
                    log.warning("blocked connection to %s (%s)", endpoint_key(host, port), address)
                    raise BlockedAddressError(host, port, address)
        error: OSError | None = None
        for address in addresses:
            try:
                sock = create_connection(
                    (address, port),
                    conn.timeout,
                    source_address=conn.source_address,
                    socket_options=conn.socket_options,
                )
            except TimeoutError as exc:
                # Trying the next address would multiply the connect timeout the caller asked for.
                raise ConnectTimeoutError(
                    conn, f"Connection to {host} timed out. (connect timeout={conn.timeout})"
                ) from exc
            except OSError as exc:
                error = exc
                continue
            sys.audit("http.client.connect", conn, host, port)
            # Forget closed connections so a long-lived adapter does not keep them all.
            self._connections = [c for c in self._connections if c.sock is not None]
            self._connections.append(conn)
            return sock
        raise NewConnectionError(conn, f"Failed to establish a new connection: {error}") from error
