"""litellm, imported once and offline, and the model name it needs.

litellm is imported lazily (``import_litellm``) because importing it takes seconds; the web process
and commands that never call a model should not pay for it.

Model names. Without ``base_url`` the model goes to litellm as given (``gpt-4o-mini``,
``anthropic/claude-sonnet-4-5``, ``ollama/llama3.1``...). With ``base_url`` (any OpenAI-compatible
server: vLLM, llama.cpp, LM Studio, a proxy) litellm needs the ``openai/`` provider prefix plus
``api_base``; a plain name such as ``smollm2`` or ``meta-llama/Llama-3.1-8B`` is therefore sent as
``openai/smollm2``. Names that already start with a litellm provider (``openai/``, ``hosted_vllm/``,
``ollama/``...) are left alone.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

# Servers for local models rarely need a key, but the openai SDK refuses to send a request without
# one; this placeholder also keeps a real OPENAI_API_KEY from the environment away from them.
PLACEHOLDER_API_KEY = "not-needed"

_litellm_setup_lock = threading.Lock()
_litellm_configured = False


def import_litellm() -> ModuleType:
    """Import and configure litellm once, offline."""
    global _litellm_configured
    # Without this, importing litellm fetches the model cost map from GitHub (and waits on it).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    if not _litellm_configured:
        with _litellm_setup_lock:
            if not _litellm_configured:
                # No "Give Feedback / Get Help" banners on stdout for every exception.
                litellm.suppress_debug_info = True
                # litellm's embedding path turns max_retries=0 into this default (`0 or DEFAULT`),
                # so the openai SDK would retry 429/5xx twice behind our back. Our loop retries.
                litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]  # declared Final, read per call
                _litellm_configured = True
    return litellm


def litellm_model_name(model: str, base_url: str) -> str:
    """The model string litellm needs; see the module docstring."""
    if not base_url:
        return model
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix and prefix in _litellm_providers():
        return model
    return f"openai/{model}"


def _litellm_providers() -> frozenset[str]:
    litellm = import_litellm()
    return frozenset(str(getattr(p, "value", p)) for p in litellm.provider_list)
