"""RAGEval recall / EIR on hand-made examples, and the percentiles the tables show (no database)."""

from __future__ import annotations

import numpy as np
import pytest

from fable_benchmarks.metrics import SentenceSplitter, percentile, score_query

TWO_SENTENCES = "Acme raised $5 million in March 2021. The money funded a new plant in Ohio."


def test_splitter_uses_pysbd_and_caches() -> None:
    split = SentenceSplitter()
    assert split(TWO_SENTENCES) == (
        "Acme raised $5 million in March 2021.",
        "The money funded a new plant in Ohio.",
    )
    assert split("  ") == ()
    split(TWO_SENTENCES)
    assert len(split) == 2, "each distinct text is segmented once"


def test_a_reference_needs_every_sentence() -> None:
    first_only = ["Acme raised $5 million in March 2021. Something else entirely."]
    score = score_query([TWO_SENTENCES], first_only)
    assert score.recall == 0.0 and score.recalled == 0, "a partial match does not count"
    # ...but the matched sentence still counts toward EIR (7 words of 10 retrieved).
    assert score.matched_words == 7 and score.retrieved_words == 10
    assert score.eir == pytest.approx(0.7)


def test_sentences_may_come_from_different_chunks_but_not_straddle_one() -> None:
    chunks = ["intro. Acme raised $5 million in March 2021.", "The money funded a new plant in Ohio. end"]
    assert score_query([TWO_SENTENCES], chunks).recall == 1.0
    straddling = ["Acme raised $5 million in March 2021. The money funded", "a new plant in Ohio."]
    assert score_query([TWO_SENTENCES], straddling).recall == 0.0, "a sentence must lie in one chunk"


def test_recall_is_a_share_of_references_and_blank_ones_are_ignored() -> None:
    references = [TWO_SENTENCES, "Bob left in May.", "   "]
    score = score_query(references, ["Bob left in May. " + TWO_SENTENCES])
    assert score.references == 2 and score.recall == 1.0
    score = score_query(references, ["Bob left in May."])
    assert score.recall == 0.5 and score.recalled_mask == (False, True)


def test_eir_counts_each_matched_sentence_once_per_query() -> None:
    # Two references share a sentence; two chunks both hold it: it counts once (4 words).
    references = ["Bob left in May.", "Bob left in May. Nobody knows why he did that."]
    chunks = ["Bob left in May.", "Bob left in May."]
    score = score_query(references, chunks)
    assert score.matched_words == 4 and score.retrieved_words == 8
    assert score.eir == pytest.approx(0.5)
    assert score.recall == 0.5


def test_nothing_retrieved_scores_zero() -> None:
    score = score_query([TWO_SENTENCES], [])
    assert score.recall == 0.0 and score.eir == 0.0 and score.retrieved_words == 0
    assert score_query([], ["anything"]).recall == 0.0


def test_percentile_interpolates() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(np.percentile([0.0, 10.0], 95))
