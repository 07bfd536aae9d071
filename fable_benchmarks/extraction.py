"""PDF extraction candidates on real PDFs: extraction ceiling, pages per second, peak memory.

``python -m fable_benchmarks bench-extract --files shared/datasets/cuad/pdfs.jsonl`` (pure, no Django). The files
list is ``{"doc_id", "file"}`` a line (the file beside the list, or in its ``pdf/`` folder); the
gold references are the queries file's (``queries.jsonl`` beside the list by default).

Candidates, each run in a fresh process (so its peak memory is its own):

- ``pypdfium2``: PDFium's text as it comes (``get_text_range`` per page);
- ``pdfplumber``: pdfplumber's ``extract_text`` per page (pdfminer.six underneath);
- ``pypdfium2+clean``: what OpenFable stores (``documents.ingestion.extraction.extract``);
- ``pdfplumber+clean``: pdfplumber's words through the same layout and cleaning (no outline);
- ``reference``: the dataset's own text export (``docs.jsonl`` beside the list), as a check of
  the measure itself: it must find every reference.

Extraction ceiling: the share of gold references whose every sentence (pysbd, as recall splits
them) is found in the extracted text of its document, both sides normalised: NFKC, curly quotes
straight, dashes as "-", zero-width characters out, whitespace collapsed, and a hyphen followed by
whitespace inside a word read as the hyphen ("non- exclusive": the dataset's export keeps line
breaks after hyphens). ``strict`` is the same with NFKC, quotes and whitespace only.
"""

from __future__ import annotations

import importlib
import multiprocessing
import re
import resource
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import read_documents, read_file_list, read_queries
from fable_benchmarks.metrics import SentenceSplitter

if TYPE_CHECKING:
    from documents.ingestion.extraction.pdf_layout import Segment

CANDIDATES = ("pypdfium2", "pdfplumber", "pypdfium2+clean", "pdfplumber+clean", "reference")

_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'"}
    | {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"'}
)
_DASHES = str.maketrans(dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212", "-"))
_INVISIBLE = re.compile("[\u200b\u2060\ufeff\u00ad]")
_HYPHEN_SPACE = re.compile(r"(?<=\w)- (?=\w)")


def normalise(text: str, *, strict: bool = False) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    if strict:
        return " ".join(text.split())
    text = " ".join(_INVISIBLE.sub("", text.translate(_DASHES)).split())
    return _HYPHEN_SPACE.sub("-", text)


@dataclass(frozen=True)
class PdfFile:
    doc_id: Any
    path: Path


@dataclass(frozen=True)
class CandidateRow:
    candidate: str
    documents: int
    pages: int
    seconds: float
    pages_per_second: float
    peak_rss_mb: float  # the child process's peak resident memory
    added_mb: float  # above what it held with its libraries loaded, before the first file
    found: int  # gold references found whole
    references: int
    ceiling: float
    ceiling_strict: float
    failures: int  # files the candidate could not read

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def read_pdf_list(path: Path, limit: int = 0) -> list[PdfFile]:
    return [PdfFile(doc_id, file) for doc_id, file in read_file_list(path, limit)]


def bench_extract(
    *,
    files_path: Path,
    queries_path: Path,
    candidates: Iterable[str] = CANDIDATES,
    limit: int = 0,
    log: Callable[[str], None] = lambda message: None,
) -> list[CandidateRow]:
    files = read_pdf_list(files_path, limit)
    queries = [query for query in read_queries(queries_path) if query.doc_ids]
    wanted = {file.doc_id for file in files}
    split = SentenceSplitter()
    gold = [
        (query.doc_ids[0], split(reference))
        for query in queries
        if query.doc_ids[0] in wanted
        for reference in query.references
        if split(reference)
    ]
    rows = []
    context = multiprocessing.get_context("spawn")
    for candidate in candidates:
        log(f"{candidate}: extracting {len(files)} files")
        with context.Pool(1) as pool:
            texts, stats = pool.apply(_run_candidate, (candidate, files, files_path))
        rows.append(_row(candidate, texts, stats, gold))
        log(f"{candidate}: ceiling {rows[-1].ceiling:.1%}, {rows[-1].pages_per_second:.1f} pages/s")
    return rows


def _row(
    candidate: str, texts: dict[Any, str], stats: dict[str, float], gold: list[tuple[Any, tuple[str, ...]]]
) -> CandidateRow:
    found = {True: 0, False: 0}
    for strict in (False, True):
        documents = {doc_id: normalise(text, strict=strict) for doc_id, text in texts.items()}
        found[strict] = sum(
            1
            for doc_id, sentences in gold
            if all(normalise(sentence, strict=strict) in documents.get(doc_id, "") for sentence in sentences)
        )
    references = len(gold)
    return CandidateRow(
        candidate=candidate,
        documents=len(texts),
        pages=int(stats["pages"]),
        seconds=round(stats["seconds"], 2),
        pages_per_second=round(stats["pages"] / stats["seconds"], 1)
        if stats["seconds"] and stats["pages"]
        else 0.0,
        peak_rss_mb=round(stats["peak_mb"], 1),
        added_mb=round(stats["peak_mb"] - stats["base_mb"], 1),
        found=found[False],
        references=references,
        ceiling=found[False] / references if references else 0.0,
        ceiling_strict=found[True] / references if references else 0.0,
        failures=int(stats["failures"]),
    )


# -- in the child process


def _rss_mb(field: str = "VmHWM") -> float:
    """The process's peak resident memory (``VmHWM``), or its resident memory now (``VmRSS``).

    From /proc, not ``getrusage``: Linux keeps ``ru_maxrss`` across the exec that starts a spawned
    child, so it would report the parent's peak when that one is larger."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: kilobytes on BSD too


def _run_candidate(
    candidate: str, files: list[PdfFile], files_path: Path
) -> tuple[dict[Any, str], dict[str, float]]:
    read = _READERS.get(candidate)
    for module in _IMPORTS.get(candidate, ()):  # the libraries are loaded before the baseline
        importlib.import_module(module)
    base = _rss_mb("VmRSS")
    texts: dict[Any, str] = {}
    pages = failures = 0
    started = time.perf_counter()
    if read is None:  # the reference text
        docs = files_path.parent / "docs.jsonl"
        if not docs.is_file():
            raise BenchInputError(f"reference: no docs.jsonl beside {files_path}")
        texts = {document.doc_id: document.content for document in read_documents(docs)}
        texts = {file.doc_id: texts.get(file.doc_id, "") for file in files}
    else:
        for file in files:
            try:
                text, count = read(file.path.read_bytes(), file.path.name)
            except Exception:  # a candidate that fails on a file scores nothing on it
                failures += 1
                text, count = "", 0
            texts[file.doc_id] = text
            pages += count
    seconds = time.perf_counter() - started
    return texts, {
        "pages": pages,
        "seconds": seconds,
        "peak_mb": _rss_mb(),
        "base_mb": base,
        "failures": failures,
    }


def _pypdfium2_plain(data: bytes, name: str) -> tuple[str, int]:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        parts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            parts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return "\n".join(parts), len(parts)
    finally:
        document.close()


def _pypdfium2_clean(data: bytes, name: str) -> tuple[str, int]:
    from documents.ingestion.extraction import extract

    extracted = extract(data, filename=name)
    return extracted.text, extracted.pages


def _pdfplumber_plain(data: bytes, name: str) -> tuple[str, int]:
    import io

    import pdfplumber

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        parts = []
        for page in pdf.pages:
            parts.append(page.extract_text() or "")
            page.flush_cache()
        return "\n".join(parts), len(parts)


def _pdfplumber_clean(data: bytes, name: str) -> tuple[str, int]:
    """pdfplumber's words, merged into segments, through OpenFable's layout and cleaning."""
    import io

    import pdfplumber

    from documents.ingestion.extraction.assemble import assemble
    from documents.ingestion.extraction.pdf_clean import clean_pages
    from documents.ingestion.extraction.pdf_layout import PdfPage, lines_in_reading_order

    pages = []
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for page in pdf.pages:
            segments = _pdfplumber_segments(page)
            pages.append(
                PdfPage(page.height, lines_in_reading_order(segments), sum(s.chars for s in segments))
            )
            page.flush_cache()
    blocks = clean_pages(pages, [])
    return assemble(blocks, pages=len(pages), max_chars=10**9, filename=name).text, len(pages)


def _pdfplumber_segments(page: Any) -> list[Segment]:
    """The page's words, in PDF coordinates (from the bottom), the ones that touch on a line
    merged into one segment."""
    from documents.ingestion.extraction.assemble import clean_line
    from documents.ingestion.extraction.pdf_layout import Segment

    segments: list[Segment] = []
    for word in page.extract_words(extra_attrs=["size", "fontname"]):
        text = clean_line(word["text"])
        if not text:
            continue
        bottom, top = page.height - word["bottom"], page.height - word["top"]
        height = max(top - bottom, 0.5)
        bold = any(part in word["fontname"].lower() for part in ("bold", "black", "heavy"))
        last = segments[-1] if segments else None
        if last is not None and _continues(last, word, bottom=bottom, top=top, height=height):
            # pdfplumber cuts words at font changes too ("Distribution" + '")'): a space
            # only where there is a gap, by the same rule as the PDFium reader.
            last.text += (" " if word["x0"] - last.x1 > 0.07 * height else "") + text
            last.x1, last.chars = word["x1"], last.chars + len(text)
            last.bold = last.bold and bold
        else:
            segments.append(
                Segment(text, word["x0"], word["x1"], bottom, top, round(height, 1), bold, len(text))
            )
    return segments


def _continues(last: Segment, word: dict[str, Any], *, bottom: float, top: float, height: float) -> bool:
    """Whether the word goes on the segment before it: on the same line, and close after it."""
    same_line = min(top, last.top) - max(bottom, last.bottom) >= 0.5 * min(height, last.height)
    return same_line and 0 <= word["x0"] - last.x1 < 1.2 * height


_IMPORTS = {
    "pypdfium2": ("pypdfium2",),
    "pdfplumber": ("pdfplumber",),
    "pypdfium2+clean": ("documents.ingestion.extraction", "documents.ingestion.extraction.pdf_pdfium"),
    "pdfplumber+clean": ("pdfplumber", "documents.ingestion.extraction.pdf_clean"),
}
_READERS: dict[str, Callable[[bytes, str], tuple[str, int]]] = {
    "pypdfium2": _pypdfium2_plain,
    "pdfplumber": _pdfplumber_plain,
    "pypdfium2+clean": _pypdfium2_clean,
    "pdfplumber+clean": _pdfplumber_clean,
}


def queries_beside(files_path: Path) -> Path:
    return files_path.parent / "queries.jsonl"


def format_extract(rows: list[CandidateRow]) -> str:
    """The comparison as a markdown table."""
    lines = [
        "| candidate | documents | pages | pages/s | peak RSS (MB) | added (MB) | ceiling | ceiling (strict) | failed files |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        speed = f"{row.pages_per_second:.1f}" if row.pages else "–"
        lines.append(
            f"| {row.candidate} | {row.documents} | {row.pages} | {speed} | {row.peak_rss_mb:.0f} | "
            f"{row.added_mb:.0f} | {row.ceiling:.1%} ({row.found}/{row.references}) | "
            f"{row.ceiling_strict:.1%} | {row.failures} |"
        )
    return "\n".join(lines) + "\n"
