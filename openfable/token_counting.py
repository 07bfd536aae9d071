"""Token counting for budgets: cl100k_base through tiktoken, fully offline.

Budgets are in cl100k tokens whatever model is configured: one stable ruler for packing and for
benchmarks, close enough to other BPE tokenizers for budgeting.

tiktoken downloads its BPE files on first use unless ``TIKTOKEN_CACHE_DIR`` points at a copy;
litellm ships one (``litellm_core_utils/tokenizers``). We locate it with ``find_spec`` instead of
importing litellm, which takes seconds and would be wasted on a token count.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME = "cl100k_base"
# When truncating, give up at most this many characters to end on whitespace instead of mid-word.
_WHITESPACE_BACKOFF_CHARS = 64
# A query that returns documents whole counts their text again (the stored count may be stale):
# half a millisecond for a 1,500-token report, on most DragonBall queries. Texts this long are
# remembered by their digest (hashing is a hundred times cheaper than counting), the most recent
# _REMEMBERED_COUNTS of them: a few hundred kilobytes, whatever the texts' size.
_REMEMBER_MIN_CHARS = 2_000
_REMEMBERED_COUNTS = 4_096


def _point_tiktoken_at_bundled_files() -> None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return  # no litellm: tiktoken uses its own cache (and may need the network once)
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if folder.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))


@functools.cache
def _encoding() -> tiktoken.Encoding:
    _point_tiktoken_at_bundled_files()
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


class _RememberedCounts:
    """The token counts of the most recently counted long texts, by the texts' digest."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()  # web threads count at once

    def get(self, digest: bytes) -> int | None:
        with self._lock:
            count = self._counts.get(digest)
            if count is not None:
                self._counts.move_to_end(digest)
            return count

    def put(self, digest: bytes, count: int) -> None:
        with self._lock:
            self._counts[digest] = count
            self._counts.move_to_end(digest)
            while len(self._counts) > self._size:
                self._counts.popitem(last=False)


_remembered = _RememberedCounts(_REMEMBERED_COUNTS)


def count_tokens(text: str) -> int:
    """Number of cl100k_base tokens in ``text``; special-token strings count as plain text."""
    if not text:
        return 0
    if len(text) < _REMEMBER_MIN_CHARS:
        return _count(text)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    count = _remembered.get(digest)
    if count is None:
        count = _count(text)
        _remembered.put(digest, count)
    return count


def _count(text: str) -> int:
    # encode_ordinary skips the special-token scan: faster, and never raises on "<|endoftext|>".
    return len(_encoding().encode_ordinary(text))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens.

    The result is always a prefix of ``text``. It is cut at a token boundary, then backed off to
    the last whitespace when that costs at most a few dozen characters, so words stay whole.
    """
    if max_tokens <= 0 or not text:
        return ""
    encoding = _encoding()
    ids = encoding.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    keep = max_tokens
    while keep > 0:
        # A token can end inside a multi-byte character; drop the partial bytes so the result
        # stays a true prefix of the text.
        cut = encoding.decode_bytes(ids[:keep]).decode("utf-8", errors="ignore")
        cut = _back_off_to_whitespace(text, cut)
        # Re-encoding a prefix almost always gives the same tokens, but BPE is not monotone in
        # every corner: check, and shorten again in the rare case it grew.
        if len(encoding.encode_ordinary(cut)) <= max_tokens:
            return cut
        keep -= 1
    return ""


def _back_off_to_whitespace(text: str, cut: str) -> str:
    """End ``cut`` (a prefix of ``text``) on a word boundary when that is cheap."""
    if len(cut) < len(text) and (text[len(cut)].isspace() or cut[-1:].isspace()):
        return cut.rstrip() or cut  # already between words
    window_start = max(1, len(cut) - _WHITESPACE_BACKOFF_CHARS)
    for index in range(len(cut) - 1, window_start - 1, -1):
        if cut[index].isspace():
            return cut[:index].rstrip() or cut
    return cut  # one long word (or none nearby): keep the token cut


# OpenAI's chat framing: each message is wrapped in a few special tokens, and the answer is primed
# with a few more. Other chat templates differ by a handful of tokens a message.
TOKENS_PER_CHAT_MESSAGE = 3
TOKENS_TO_PRIME_CHAT_ANSWER = 3


def count_chat_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Input tokens of a chat request: its messages' contents plus the chat framing."""
    contents = sum(count_tokens(str(message.get("content") or "")) for message in messages)
    return contents + TOKENS_PER_CHAT_MESSAGE * len(messages) + TOKENS_TO_PRIME_CHAT_ANSWER
