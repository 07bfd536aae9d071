"""The host list turned into the SDK's DNS-rebinding settings, and the bearer header (plain data)."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from mcp_server.security import bearer_key, origin_allowed, transport_security


def test_exact_hosts_become_the_sdks_allowlist_on_any_port() -> None:
    settings = transport_security(["localhost", "127.0.0.1", "[::1]", "MCP.Example.com"])
    assert settings.enable_dns_rebinding_protection
    assert "mcp.example.com" in settings.allowed_hosts
    assert "mcp.example.com:*" in settings.allowed_hosts
    assert "[::1]:*" in settings.allowed_hosts
    assert "https://mcp.example.com" in settings.allowed_origins
    assert "http://localhost:*" in settings.allowed_origins


def test_patterns_leave_the_check_to_djangos_host_matching() -> None:
    # The SDK matches exact names only; the middleware applies Django's rules to these.
    assert not transport_security(["*"]).enable_dns_rebinding_protection
    assert not transport_security(["example.com", ".example.com"]).enable_dns_rebinding_protection
    assert not transport_security([]).enable_dns_rebinding_protection


def test_bearer_key_reads_only_a_bearer_header() -> None:
    assert bearer_key(Headers({"authorization": "Bearer of_abc"})) == "of_abc"
    assert bearer_key(Headers({"authorization": "bearer   of_abc  "})) == "of_abc"
    assert bearer_key(Headers({"authorization": "Basic eDp5"})) is None
    assert bearer_key(Headers({"authorization": "Bearer "})) is None
    assert bearer_key(Headers({})) is None


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:8000", True),
        ("HTTP://LocalHost:8000", True),
        ("http://localhost:9999", False),  # another app on the same machine (before: accepted)
        ("https://localhost:8000", False),  # another scheme is another origin
        ("http://localhost", False),  # port 80, not 8000
        ("http://127.0.0.1:8000", False),  # another name is another origin, even for one address
        ("null", False),  # a sandboxed frame or a file: page
        ("http://localhost:notaport", False),
    ],
)
def test_an_origin_must_match_scheme_host_and_port(origin: str, allowed: bool) -> None:
    assert origin_allowed(origin, scheme="http", host="localhost:8000") is allowed


def test_a_default_port_may_be_left_out_on_either_side() -> None:
    assert origin_allowed("https://mcp.example.com", scheme="https", host="mcp.example.com:443")
    assert origin_allowed("https://mcp.example.com:443", scheme="https", host="mcp.example.com")
    assert not origin_allowed("http://mcp.example.com", scheme="https", host="mcp.example.com")


def test_trusted_origins_are_matched_whole_and_by_subdomain() -> None:
    trusted = ["https://tools.example.org", "https://*.example.net"]
    assert origin_allowed("https://tools.example.org", scheme="http", host="localhost:8000", trusted=trusted)
    assert not origin_allowed("https://tools.example.org:8443", scheme="http", host="x", trusted=trusted)
    assert origin_allowed("https://a.example.net", scheme="http", host="localhost:8000", trusted=trusted)
    assert not origin_allowed("http://a.example.net", scheme="http", host="localhost:8000", trusted=trusted)
    assert not origin_allowed("https://example.net.evil.com", scheme="http", host="x", trusted=trusted)
