"""``python -m fable_benchmarks bench-structure``: each document with known headings through the
product's own extraction and structural tree builder, in this process and without the database,
scored by ``fable_benchmarks.structure``.

The documents: the hand-checked CUAD contract PDFs (``structure_gold/cuad_pdf.json``, the PDFs
under ``shared/datasets/cuad/pdf``), and the documents ``structure_documents`` makes at run time:
Markdown, HTML and Word files with their headings known, and PDFs whose own bookmarks are the
gold, read with the outline ignored (``extract(..., use_outline=False)``) so the builder finds the
headings from the page alone. Extraction and building are what ingestion runs
(``documents.services.jobs.document_index``): the same ``extract``, the configured embedder behind
the same memo, the same token counter. ``read_gold_file`` reads the hand-checked headings.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fable_benchmarks import BenchInputError
from fable_benchmarks.structure import (
    FORMATS,
    MATCHED,
    DocumentScore,
    GoldHeading,
    GoldOutline,
    nodes_from_tree,
    score_document,
)

DEFAULT_CUAD_GOLD = Path(__file__).resolve().parent / "structure_gold" / "cuad_pdf.json"
_GENERATED_FORMATS = {"markdown": "md", "html": "html", "docx": "docx", "pdf-bookmarks": "pdf"}


@dataclass(frozen=True)
class StructureCase:
    """One document to score: its name, format row, gold headings and where its bytes are."""

    name: str
    format: str  # one of structure.FORMATS
    gold: GoldOutline
    data: bytes = b""  # a generated document
    path: Path | None = None  # a file on disk (read when its turn comes)
    use_outline: bool = True  # False: extraction must not read the PDF's bookmarks (they are the gold)

    def read(self) -> bytes:
        return self.path.read_bytes() if self.path is not None else self.data


def cuad_cases(gold_path: Path, pdf_dir: Path) -> list[StructureCase]:
    """The hand-checked contract PDFs; a gold entry whose PDF is missing is the user's to fix."""
    cases = []
    for entry in read_gold_file(gold_path):
        path = pdf_dir / entry.file
        if not path.is_file():
            raise BenchInputError(f"{gold_path} names {entry.file}, which is not in {pdf_dir} (--pdf-dir)")
        cases.append(StructureCase(entry.file, "pdf", entry.outline, path=path))
    return cases


def generated_cases(formats: Iterable[str]) -> list[StructureCase]:
    """The documents made at run time, in each of the wanted generated formats."""
    from fable_benchmarks import structure_documents as made

    writers: dict[str, Callable[[made.GeneratedDocument], bytes]] = {
        "markdown": made.markdown_bytes,
        "html": made.html_bytes,
        "docx": made.docx_bytes,
        "pdf-bookmarks": made.pdf_bytes,
    }
    wanted = [name for name in _GENERATED_FORMATS if name in set(formats)]
    cases = []
    for document in made.generated_documents():
        for name in wanted:
            data = writers[name](document)
            bookmarked = name == "pdf-bookmarks"
            # A bookmarked PDF's gold is read back from its outline: what the file says, not
            # what the generator meant to write.
            gold = made.outline_gold(data, title=document.title) if bookmarked else document.gold
            filename = f"{document.slug}.{_GENERATED_FORMATS[name]}"
            cases.append(StructureCase(filename, name, gold, data=data, use_outline=not bookmarked))
    return cases


def select_cases(
    cases: Sequence[StructureCase], *, formats: Iterable[str], only: str = "", limit: int = 0
) -> list[StructureCase]:
    """The cases of ``formats`` whose name holds ``only``, the first ``limit`` of each format."""
    wanted = set(formats)
    chosen: list[StructureCase] = []
    taken = dict.fromkeys(FORMATS, 0)
    for case in cases:
        if case.format not in wanted or only.lower() not in case.name.lower():
            continue
        if limit and taken[case.format] >= limit:
            continue
        taken[case.format] += 1
        chosen.append(case)
    return chosen


@dataclass(frozen=True)
class StructureRun:
    scores: tuple[DocumentScore, ...]
    seconds: float


def bench_structure(
    cases: Sequence[StructureCase], *, log: Callable[[str], None] = lambda message: None
) -> StructureRun:
    from documents.services.jobs import MemoEmbedder
    from openfable.embeddings import get_embedder

    embedder = get_embedder()  # loads the local model once for every document
    started = time.perf_counter()
    scores = []
    for number, case in enumerate(cases, start=1):
        score = score_case(case, embed=MemoEmbedder(embedder).embed_passages)
        log(
            f"[{number}/{len(cases)}] {case.format} {case.name}: {score.count(MATCHED)}/{score.located} "
            f"headings matched, {len(score.invented)}/{score.internal_nodes} sections invented, "
            f"{score.seconds:.1f} s"
        )
        scores.append(score)
    return StructureRun(tuple(scores), round(time.perf_counter() - started, 1))


def score_case(case: StructureCase, *, embed: Callable[[Sequence[str]], Any]) -> DocumentScore:
    """Extract, build and score one document (``embed``: the embedder's ``embed_passages``)."""
    from documents.ingestion.extraction import ExtractionError, extract
    from documents.ingestion.structural import build_structural_tree
    from documents.services.extracting import extraction_limits
    from openfable.token_counting import count_tokens

    started = time.perf_counter()
    try:
        extracted = extract(
            case.read(), filename=case.name, limits=extraction_limits(), use_outline=case.use_outline
        )
    except ExtractionError as error:
        raise BenchInputError(f"{case.name}: {error.message}") from None
    tree = build_structural_tree(
        extracted.text,
        embed=embed,
        count_tokens=count_tokens,
        # As ingestion does (documents.services.extracting): the heading lines extraction guessed
        # from a PDF's fonts, whose levels the builder settles by their numbering.
        font_heading_starts=frozenset(hint.start for hint in extracted.headings if hint.source == "font"),
    )
    seconds = time.perf_counter() - started
    return score_document(
        name=case.name,
        format=case.format,
        text=extracted.text,
        nodes=nodes_from_tree(tree),
        gold=case.gold,
        page_spans=[(span.page, span.start, span.end) for span in extracted.page_spans],
        seconds=round(seconds, 2),
    )


# -- The hand-checked gold --------------------------------------------------------------------


@dataclass(frozen=True)
class GoldFile:
    file: str  # the PDF's name in the PDF folder
    doc_id: Any
    outline: GoldOutline


def read_gold_file(path: Path) -> list[GoldFile]:
    """A JSON list of {"file", "doc_id", "title", "headings": [{"text", "level", "page"}], ...}."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise BenchInputError(f"{path}: cannot read the gold headings ({error})") from None
    if not isinstance(entries, list):
        raise BenchInputError(f"{path}: expected a JSON list of documents")
    gold = []
    for number, entry in enumerate(entries, start=1):
        try:
            headings = tuple(
                GoldHeading(str(item["text"]), int(item["level"]), int(item.get("page") or 0))
                for item in entry["headings"]
            )
            gold.append(
                GoldFile(
                    str(entry["file"]), entry.get("doc_id"), GoldOutline(entry.get("title") or "", headings)
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise BenchInputError(
                f'{path}: document {number} needs "file" and "headings" of {{"text", "level"}} ({error!r})'
            ) from None
    return gold
