"""Pytest fixtures around the fakes; the root conftest imports them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from openfable.llm_endpoints import forget_endpoints
from tests.fakes.llm.server import ScriptedOpenAIServer


@pytest.fixture(autouse=True)
def fresh_llm_endpoints() -> Iterator[None]:
    """Every test starts from what a new process knows about LLM endpoints: no learned response
    format, no cool-down (a scripted server's port, and so its endpoint, may come round again)."""
    forget_endpoints()
    yield
    forget_endpoints()


@pytest.fixture
def scripted_openai() -> Iterator[ScriptedOpenAIServer]:
    """A started :class:`ScriptedOpenAIServer`; script it with ``script_chat`` / ``script_embeddings``."""
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def scripted_llm(scripted_openai: ScriptedOpenAIServer, settings: SettingsWrapper) -> ScriptedOpenAIServer:
    """The product's LLM settings pointed at ``scripted_openai`` (a model name, a key, a short
    timeout and retry delay); a test module adds what it needs beside them.

    The model name is new in every test: answers cached by worker threads (their own database
    connections commit, outside the test's rolled-back transaction) outlive the test, and the
    cache key is (model, prompt), so another test asking the same prompt would get them."""
    settings.LLM_MODEL = f"scripted-model-{uuid.uuid4().hex[:12]}"
    settings.LLM_BASE_URL = scripted_openai.base_url
    settings.LLM_API_KEY = "test-key"
    settings.LLM_TIMEOUT = 2.0
    settings.LLM_RETRY_BASE_DELAY = 0.01
    return scripted_openai
