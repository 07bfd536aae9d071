"""The simulated users of `python -m fable_benchmarks bench-load`, run by locust in its own process (gevent).

Not imported by Django: ``fable_benchmarks.load`` writes a plan (JSON: the API token, the sign-in, the
collection, query texts, budgets, document ids, think time, the UI users' share) and starts
``locust -f`` on this file with ``OPENFABLE_LOAD_PLAN`` naming it. Every request, and every error a
user's own code raises, is written as one JSON line to the file named by ``OPENFABLE_LOAD_RECORDS``
when locust quits; the runner computes the percentiles from those lines, so nothing depends on the
shape of locust's own reports.

Two kinds of users, in the plan's proportion:

- ``QueryUser``: a program with an API token, ``POST /v1/api/query`` with a random dev query at a
  random budget, scoped to the collection; an answer without evidence counts as an error.
- ``PageUser``: a person signed in through the sign-in form (session cookie, CSRF token) who opens
  the corpus page of the collection, a document page, and the query page with a query.
  Redirects are not followed: a page that sends the person back to the sign-in is an error.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from locust import HttpUser, between, events, task

PLAN: dict[str, Any] = (
    json.loads(open(os.environ["OPENFABLE_LOAD_PLAN"], encoding="utf-8").read())  # noqa: SIM115
    if os.environ.get("OPENFABLE_LOAD_PLAN")
    else {}
)
_RECORDS: list[dict[str, Any]] = []
# A user waits between its requests: people read, programs do something with the evidence.
_THINK = float(PLAN.get("think_seconds", 1.0))
_UI_SHARE = float(PLAN.get("ui_share", 0.2))
REQUEST_TIMEOUT_SECONDS = 60.0  # one answer slower than this is a failure from a user's point of view


@events.request.add_listener
def _record_request(
    name: str, response_time: float, exception: BaseException | None, context: dict[str, Any], **_: Any
) -> None:
    _RECORDS.append(
        {
            "name": name,
            "ms": round(response_time, 2),
            "error": None if exception is None else f"{type(exception).__name__}: {exception}"[:300],
            "cached": bool(context.get("cached")),
        }
    )


@events.user_error.add_listener
def _record_user_error(user_instance: Any, exception: BaseException, **_: Any) -> None:
    _RECORDS.append({"name": "user code", "ms": 0.0, "error": f"{type(exception).__name__}: {exception}"})


@events.quitting.add_listener
def _write_records(**_: Any) -> None:
    path = os.environ.get("OPENFABLE_LOAD_RECORDS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(record) + "\n" for record in _RECORDS)


class QueryUser(HttpUser):
    weight = max(0, round(100 * (1 - _UI_SHARE)))
    wait_time = between(0, 2 * _THINK)
    network_timeout = connection_timeout = REQUEST_TIMEOUT_SECONDS

    def on_start(self) -> None:
        self.client.headers["Authorization"] = f"Bearer {PLAN['token']}"

    @task
    def query(self) -> None:
        budget = random.choice(PLAN["budgets"])
        body = {
            "query": random.choice(PLAN["queries"]),
            "token_budget": budget,
            "collection": PLAN["collection"],
        }
        with self.client.post(
            "/v1/api/query", json=body, name=f"query {budget}", catch_response=True
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
                return
            try:
                answer = response.json()
            except ValueError:
                response.failure(f"an answer that is not JSON: {response.text[:200]}")
                return
            response.request_meta["context"]["cached"] = bool(answer.get("result", {}).get("cached"))
            if not answer.get("chunks"):
                response.failure("an answer without evidence")


class PageUser(HttpUser):
    weight = max(0, round(100 * _UI_SHARE))
    wait_time = between(0, 2 * _THINK)
    network_timeout = connection_timeout = REQUEST_TIMEOUT_SECONDS

    def on_start(self) -> None:
        self.client.get("/accounts/login/", name="sign-in: form")
        form = {
            "username": PLAN["username"],
            "password": PLAN["password"],
            "csrfmiddlewaretoken": self.client.cookies.get("csrftoken", ""),
        }
        with self.client.post(
            "/accounts/login/", data=form, name="sign-in: submit", allow_redirects=False, catch_response=True
        ) as response:
            if response.status_code != 302:
                response.failure(f"the sign-in answered HTTP {response.status_code}, not a redirect")

    def _page(self, path: str, *, name: str, expect: str) -> None:
        with self.client.get(path, name=name, allow_redirects=False, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code} {response.headers.get('location', '')}")
            elif expect not in response.text:
                response.failure(f"the page lacks {expect!r}")

    @task
    def corpus_page(self) -> None:
        self._page(f"/?collection={PLAN['collection']}", name="page: corpus", expect="<h1>Corpus</h1>")

    @task
    def document_page(self) -> None:
        self._page(
            f"/documents/{random.choice(PLAN['document_ids'])}/", name="page: document", expect='class="tree'
        )

    @task
    def query_page(self) -> None:
        params = {
            "query": random.choice(PLAN["queries"]),
            "budget": str(random.choice(PLAN["budgets"])),
            "collection": PLAN["collection"],
        }
        query = "&".join(f"{key}={_quote(value)}" for key, value in params.items())
        self._page(f"/query/?{query}", name="page: query", expect='class="chunk"')


def _quote(value: str) -> str:
    from urllib.parse import quote_plus

    return quote_plus(value)
