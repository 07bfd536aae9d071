from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openfable import token_counting
from openfable.token_counting import count_tokens, truncate_to_tokens

REPO_ROOT = Path(__file__).resolve().parents[2]
TEXT = (
    "Section 4.2 Termination. Either party may terminate this Agreement upon thirty (30) days' written "
    "notice if the other party materially breaches any provision and fails to cure such breach. "
) * 5


def test_count_tokens_matches_cl100k() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens(TEXT) > 100


def test_special_token_text_is_counted_as_plain_text() -> None:
    # Documents can contain anything; a literal special-token string must not raise.
    assert count_tokens("before <|endoftext|> after") > 3


def test_truncate_returns_short_text_unchanged() -> None:
    assert truncate_to_tokens("short text", 50) == "short text"


def test_truncate_to_zero_or_negative_is_empty() -> None:
    assert truncate_to_tokens(TEXT, 0) == ""
    assert truncate_to_tokens(TEXT, -3) == ""


def test_truncate_is_a_prefix_within_budget_ending_on_a_word() -> None:
    for budget in (1, 5, 17, 40, 99):
        cut = truncate_to_tokens(TEXT, budget)
        assert TEXT.startswith(cut)
        assert 0 < count_tokens(cut) <= budget
        assert cut == cut.rstrip()
        # The word is whole: the source continues with whitespace or punctuation right after it.
        following = TEXT[len(cut)]
        assert not following.isalnum(), (budget, cut[-20:], TEXT[len(cut) : len(cut) + 10])


def test_truncate_is_close_to_the_budget() -> None:
    # Backing off to whitespace costs at most a few words.
    assert count_tokens(truncate_to_tokens(TEXT, 80)) >= 70


def test_truncate_keeps_multibyte_characters_whole() -> None:
    text = "日本語のテキストはトークン境界が文字の途中に来ることがあります。" * 4
    for budget in range(1, 30):
        cut = truncate_to_tokens(text, budget)
        assert text.startswith(cut)
        assert "\ufffd" not in cut
        assert count_tokens(cut) <= budget


def test_tokens_work_offline_without_importing_litellm() -> None:
    # A fresh interpreter: counting must not import litellm (seconds) nor touch the network, and it
    # must point tiktoken at litellm's bundled files.
    code = (
        "import os, sys\n"
        "from openfable.token_counting import count_tokens\n"
        "assert count_tokens('hello world') == 2\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print(os.environ['TIKTOKEN_CACHE_DIR'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    # An unroutable proxy makes any download attempt fail fast instead of hanging.
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(os.path.join("litellm_core_utils", "tokenizers"))


def test_long_texts_are_counted_once_and_told_apart_by_their_content(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []
    real_count = token_counting._count

    def count(text: str) -> int:
        counted.append(len(text))
        return real_count(text)

    monkeypatch.setattr(token_counting, "_count", count)
    monkeypatch.setattr(token_counting, "_remembered", token_counting._RememberedCounts(2))
    long_text = TEXT * 10  # over the length worth remembering
    edited = long_text.replace("thirty (30)", "ninety (90) calendar", 1)
    expected = real_count(long_text)
    assert count_tokens(long_text) == count_tokens(long_text) == expected
    assert counted == [len(long_text)]  # the second count was remembered
    assert count_tokens(edited) == real_count(edited) != expected  # one edit: counted anew
    assert count_tokens(TEXT) == count_tokens(TEXT)  # short texts are always counted
    assert counted == [len(long_text), len(edited), len(TEXT), len(TEXT)]
    count_tokens(edited + " a third one")  # past the memo's size: the oldest is forgotten
    count_tokens(long_text)
    assert counted[-1] == len(long_text)
