"""Wrong settings stop a start with a message naming the variable and the fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import REPO_ROOT


def _check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full_env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=REPO_ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_non_integer_setting_is_named_with_its_fix() -> None:
    result = _check({"OPENFABLE_RETRIEVAL_TOP_K": "lots", "OPENFABLE_EMBEDDING_BATCH_SIZE": "0"})
    assert result.returncode != 0
    assert "OPENFABLE_RETRIEVAL_TOP_K='lots' is not an integer" in result.stderr
    assert "Set OPENFABLE_RETRIEVAL_TOP_K to a whole number between 1 and 1000" in result.stderr
    assert "OPENFABLE_EMBEDDING_BATCH_SIZE=0 is out of range" in result.stderr


def test_a_number_outside_its_bounds_is_named_with_its_range() -> None:
    result = _check({"OPENFABLE_RETRIEVAL_LEXICAL_NODE_SHARE": "1.5", "OPENFABLE_RETRIEVAL_DECAY": "nan"})
    assert result.returncode != 0
    assert "OPENFABLE_RETRIEVAL_LEXICAL_NODE_SHARE=1.5 is above 1.0" in result.stderr
    assert "Set OPENFABLE_RETRIEVAL_LEXICAL_NODE_SHARE to a number between 0.0 and 1.0" in result.stderr
    assert "OPENFABLE_RETRIEVAL_DECAY=nan is not a finite number" in result.stderr


@pytest.mark.slow
def test_a_production_start_without_a_secret_key_is_refused() -> None:
    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}"
    result = _check({"OPENFABLE_DATABASE_URL": url})
    assert result.returncode != 0
    assert "OPENFABLE_SECRET_KEY is not set for a production start" in result.stderr
    ok = _check({"OPENFABLE_DATABASE_URL": url, "OPENFABLE_SECRET_KEY": "x" * 50})
    assert ok.returncode == 0, ok.stderr


@pytest.mark.django_db
@pytest.mark.slow
def test_embedding_dimensions_that_do_not_match_the_stored_vectors_are_refused() -> None:
    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}"
    env = {"OPENFABLE_DATABASE_URL": url, "OPENFABLE_SECRET_KEY": "x" * 50}
    result = _check({**env, "OPENFABLE_EMBEDDING_DIMENSIONS": "1024"}, "--database", "default")
    assert result.returncode != 0
    assert (
        "OPENFABLE_EMBEDDING_DIMENSIONS=1024 does not match the stored vectors (384 dimensions)"
        in result.stderr
    )
    assert "manage.py openfable reembed" in result.stderr
    assert _check(env, "--database", "default").returncode == 0


@pytest.mark.slow
def test_ocr_settings_are_named_with_their_fix() -> None:
    result = _check({"OPENFABLE_OCR": "maybe"})
    assert result.returncode != 0
    assert "OPENFABLE_OCR='maybe' is not one of auto, off" in result.stderr
    assert "Set OPENFABLE_OCR to one of auto, off, or unset it to use auto" in result.stderr


@pytest.mark.slow
def test_an_ocr_language_tesseract_lacks_is_a_warning_at_start() -> None:
    from tests.documents.ingestion.scans import require_tesseract

    require_tesseract()
    result = _check({"OPENFABLE_OCR_LANGUAGES": "eng+xqz"})
    assert "(openfable.W010) OCR cannot run: Tesseract has no xqz language data" in result.stderr
    assert "apt-get install tesseract-ocr-xqz" in result.stderr
    assert "(openfable.W010)" not in _check({"OPENFABLE_OCR": "off", "OPENFABLE_OCR_LANGUAGES": "xqz"}).stderr
