"""RAGEval's retrieval metrics, recall and EIR, as pure functions (no Django, no database).

Sentences. A gold reference is split into sentences with pysbd's English segmenter
(``Segmenter(language="en", clean=False)``), each stripped, empty ones dropped: exactly what
RAGEval's ``split_sentences`` does. pysbd is slow (milliseconds per reference), so a
``SentenceSplitter`` remembers every reference it has split: one benchmark run segments each
distinct reference once, whatever the number of methods and budgets.

Recall (RAGEval's ``exist_match``). A reference is *recalled* when every one of its sentences is an
exact substring of some retrieved chunk. Each sentence must lie inside one chunk (a sentence cut in
two by a chunk boundary does not count), but different sentences of the same reference may come
from different chunks. A reference with no sentence at all (blank) is ignored. A query's recall is
recalled references / references; the benchmark averages it over the queries that have at least
one non-blank reference.

EIR, effective information rate. For one query::

    EIR = sum(words(s) for s in M) / sum(words(c) for c in retrieved chunks)

where M is the set of *distinct* sentences of the query's references that are an exact substring
of some retrieved chunk (a matched sentence counts once per query, even if two references share
it or several chunks hold it), and words(x) = len(x.split()). Nothing retrieved gives 0. Two
differences from RAGEval's script, both deliberate: it tests sentences against the chunks joined
with a space (so a sentence straddling two adjacent chunks can match) and counts a sentence again
for every reference that contains it; here a sentence must lie within one chunk, as for recall, and
counts once. EIR is averaged over the same queries as recall.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


class SentenceSplitter:
    """pysbd English sentence splitting with a cache: each distinct text is segmented once."""

    def __init__(self) -> None:
        self._segmenter: Any = None
        self._cache: dict[str, tuple[str, ...]] = {}

    def __call__(self, text: str) -> tuple[str, ...]:
        cached = self._cache.get(text)
        if cached is None:
            if self._segmenter is None:
                import pysbd

                self._segmenter = pysbd.Segmenter(language="en", clean=False)
            pieces = self._segmenter.segment(text) if text.strip() else []
            cached = tuple(piece.strip() for piece in pieces if piece.strip())
            self._cache[text] = cached
        return cached

    def __len__(self) -> int:
        return len(self._cache)


def word_count(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True, slots=True)
class QueryScore:
    recall: float  # recalled / references; 0.0 when the query has no reference
    eir: float
    references: int  # non-blank references
    recalled: int
    recalled_mask: tuple[bool, ...]  # per non-blank reference, in the order given
    matched_words: int
    retrieved_words: int


def reference_sentences(references: Iterable[str], split: SentenceSplitter) -> list[tuple[str, ...]]:
    """The sentences of each non-blank reference (blank ones are left out)."""
    return [sentences for sentences in (split(reference) for reference in references) if sentences]


def score_query(
    references: Sequence[str], chunks: Sequence[str], split: SentenceSplitter | None = None
) -> QueryScore:
    """Recall and EIR of one query's retrieved ``chunks`` against its gold ``references``."""
    split = split or SentenceSplitter()
    return score_sentences(reference_sentences(references, split), chunks)


def score_sentences(references: Sequence[tuple[str, ...]], chunks: Sequence[str]) -> QueryScore:
    """``score_query`` over references already split into sentences (see ``reference_sentences``)."""
    found: dict[str, bool] = {}

    def contained(sentence: str) -> bool:
        hit = found.get(sentence)
        if hit is None:
            hit = found[sentence] = any(sentence in chunk for chunk in chunks)
        return hit

    mask = tuple(all(contained(sentence) for sentence in sentences) for sentences in references)
    # Every sentence of every reference, so EIR also credits the matched half of a partly found one.
    matched_words = sum(
        word_count(sentence)
        for sentence in {sentence for sentences in references for sentence in sentences}
        if contained(sentence)
    )
    retrieved_words = sum(word_count(chunk) for chunk in chunks)
    recalled = sum(mask)
    return QueryScore(
        recall=recalled / len(references) if references else 0.0,
        eir=matched_words / retrieved_words if retrieved_words else 0.0,
        references=len(references),
        recalled=recalled,
        recalled_mask=mask,
        matched_words=matched_words,
        retrieved_words=retrieved_words,
    )


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation, as numpy's default; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
