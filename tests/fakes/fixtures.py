"""Pytest fixtures around the fakes; the root conftest imports them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer


@pytest.fixture
def scripted_openai() -> Iterator[ScriptedOpenAIServer]:
    """A started :class:`ScriptedOpenAIServer`; script it with ``script_chat`` / ``script_embeddings``."""
    with ScriptedOpenAIServer() as server:
        yield server
