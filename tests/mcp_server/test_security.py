"""The host list turned into the SDK's DNS-rebinding settings, and the bearer header (plain data)."""

from __future__ import annotations

from starlette.datastructures import Headers

from mcp_server.security import bearer_key, transport_security


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
