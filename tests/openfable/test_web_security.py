"""Every form is CSRF-protected, and with debug off an error page gives nothing away.

The CSRF test walks every URL the project routes (its pages, the admin's, the REST API's) and
posts to each, signed in, without a token: each must be refused with 403 for the missing token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, path
from django.urls.resolvers import RoutePattern
from pytest_django.fixtures import Settings

from openfable.urls import urlpatterns as project_urlpatterns
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db

# A value each path converter accepts: the CSRF check runs before the view looks anything up.
_CONVERTER_VALUES = {
    "int": "1",
    "slug": "x",
    "str": "x",
    "path": "x",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def _routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern.pattern, RoutePattern):
            route = prefix + str(pattern.pattern)
            if "^" in route or "$" in route:  # under a regex include: not a plain route
                continue
            yield "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: _CONVERTER_VALUES[m.group(1) or "str"], route)


def test_every_post_without_a_csrf_token_is_refused() -> None:
    admin = get_user_model().objects.create_superuser(username="root", password="correct horse battery")
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    urls = sorted(set(_routes(get_resolver().url_patterns)))
    assert len(urls) > 60 and "/admin/auth/user/add/" in urls and "/v1/api/documents" in urls
    exempt = Client()  # the test client's default: no CSRF check, to tell a CSRF 403 from others
    exempt.force_login(admin)
    allowed = []
    for url in urls:
        response = client.post(url, {"title": "x"})
        if response.status_code == 405:
            continue  # no POST handler and no session (GET /v1/api/health): nothing to forge
        # Django's refusal names CSRF; a browsable DRF page (/docs) says only "403 Forbidden", so
        # it counts when the same post without the check is not a 403.
        refused_for_csrf = response.status_code == 403 and (
            "CSRF" in response.content.decode() or exempt.post(url, {"title": "x"}).status_code != 403
        )
        if not refused_for_csrf:
            allowed.append(f"{url}: {response.status_code}")
    assert not allowed, "accepted without a CSRF token:\n" + "\n".join(allowed)
    anonymous = Client(enforce_csrf_checks=True)
    signed_out = anonymous.post("/accounts/login/", {"username": "root", "password": "correct horse battery"})
    assert signed_out.status_code == 403, "the sign-in form too (login CSRF)"


def test_every_post_form_in_the_templates_carries_the_token() -> None:
    forms = []
    for template in sorted((REPO_ROOT / "templates").rglob("*.html")):
        for form in re.finditer(r"<form\b[^>]*>.*?</form>", template.read_text(), re.DOTALL):
            if re.search(r'method="post"', form.group(0), re.IGNORECASE):
                forms.append((template.name, form.group(0)))
    assert len(forms) >= 15
    missing = [name for name, form in forms if "{% csrf_token %}" not in form]
    assert not missing, f"post forms without {{% csrf_token %}} in {missing}"


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("internal detail: /srv/secret/path")


urlpatterns = [path("boom/", _boom), *project_urlpatterns]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_with_debug_off_an_error_page_shows_no_trace_and_no_settings(settings: Settings, debug: bool) -> None:
    settings.DEBUG = debug
    settings.ROOT_URLCONF = __name__
    settings.SECRET_KEY = "a-secret-that-must-never-show-" + "x" * 30
    client = Client(raise_request_exception=False)
    crashed = client.get("/boom/")
    missing = client.get("/no-such-page/")
    assert crashed.status_code == 500 and missing.status_code == 404
    bodies = crashed.content.decode() + missing.content.decode()
    leaks = [
        "Traceback",
        "internal detail",
        "/srv/secret/path",
        "SECRET_KEY",
        "DATABASES",
        "urlpatterns",
        "URLconf",
    ]
    if debug:  # the check would see a leak: debug pages show all of these but the key's value
        assert all(leak in bodies for leak in ("Traceback", "internal detail", "URLconf"))
    else:
        assert not [leak for leak in leaks if leak in bodies], bodies[:2000]
        # ... and they are the app's own pages, saying what happened and where to go next.
        assert "<h1>Something went wrong</h1>" in crashed.content.decode()
        assert "<h1>Not found</h1>" in missing.content.decode()
        assert all("Back to the corpus" in page.content.decode() for page in (crashed, missing))
    assert "a-secret-that-must-never-show" not in bodies


def test_the_site_icon_is_served_from_static_and_linked(client: Client) -> None:
    """Browsers ask for /favicon.ico on every page: it answers (no 404 in every log), and the
    pages link the same icon."""
    answer = client.get("/favicon.ico", follow=True)
    assert answer.status_code == 200 and answer.redirect_chain[0][0].endswith("openfable/favicon.svg")
    body = b"".join(answer.streaming_content) if answer.streaming else answer.content  # type: ignore[attr-defined]
    assert body.startswith(b"<svg")
    login = client.get("/accounts/login/").content.decode()
    assert 'rel="icon" href="/static/openfable/favicon.svg"' in login
