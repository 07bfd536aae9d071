"""How fast scanned pages are read (OCR): pages per second through the worker's own path.

``python -m fable_benchmarks bench-ocr --pages 20`` (pure, no Django) makes N image-only pages, the
way a scanner writes them (text drawn into a picture, saved as a PDF page with no text layer),
at each resolution asked for, and reads them with ``extract_isolated`` and OCR on: the child
process, its memory cap and time limit, OCRmyPDF and the installed Tesseract, exactly as an
ingestion job does. Per resolution: pages per second, the share of the drawn words found in the
text (in order, case and punctuation aside), and the text layer kept beside the original.

The pages' words come from a seeded generator over a fixed vocabulary, so every run reads the
same pages and no page can be guessed from a dictionary of sentences.
"""

from __future__ import annotations

import io
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from fable_benchmarks import BenchInputError

_VOCABULARY = [
    "agreement",
    "supplier",
    "buyer",
    "delivery",
    "goods",
    "price",
    "invoice",
    "payment",
    "term",
    "notice",
    "party",
    "warranty",
    "liability",
    "damages",
    "clause",
    "schedule",
    "period",
    "month",
    "year",
    "written",
    "consent",
    "breach",
    "remedy",
    "cure",
    "termination",
    "renewal",
    "license",
    "territory",
    "exclusive",
    "royalty",
    "audit",
    "records",
    "confidential",
    "information",
    "disclosure",
    "insurance",
    "indemnify",
    "claims",
    "losses",
    "costs",
    "expenses",
    "governing",
    "law",
    "court",
    "arbitration",
    "assignment",
    "successor",
    "force",
    "majeure",
    "event",
    "obligation",
    "performance",
    "quality",
    "inspection",
    "acceptance",
    "rejection",
    "shipment",
    "carrier",
    "risk",
    "title",
    "property",
    "intellectual",
    "rights",
]
_LINES_PER_PAGE = 30
_WORDS_PER_LINE = 9
_LETTER = (8.5, 11.0)  # inches


@dataclass(frozen=True)
class OcrRow:
    dpi: int
    pages: int
    seconds: float
    pages_per_second: float
    words: int  # drawn on the pages
    words_found: float  # share of them found in the text, in order
    original_kb: float
    text_layer_kb: float
    languages: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def scanned_pages(*, pages: int, dpi: int, seed: int = 7) -> tuple[bytes, list[str]]:
    """An image-only PDF of ``pages`` Letter pages at ``dpi``, and the words drawn on it."""
    from PIL import Image, ImageDraw, ImageFont

    generator = random.Random(seed)
    width, height = int(_LETTER[0] * dpi), int(_LETTER[1] * dpi)
    font = ImageFont.load_default(size=max(8, round(dpi * 11 / 72)))  # an 11 pt typewriter
    margin, pitch = dpi, round(dpi * 16 / 72)
    pictures, words = [], []
    for _ in range(pages):
        picture = Image.new("L", (width, height), 255)
        draw = ImageDraw.Draw(picture)
        for row in range(_LINES_PER_PAGE):
            line = [generator.choice(_VOCABULARY) for _ in range(_WORDS_PER_LINE)]
            words.extend(line)
            draw.text((margin, margin + row * pitch), " ".join(line), fill=0, font=font)
        pictures.append(picture)
    out = io.BytesIO()
    pictures[0].save(out, format="PDF", save_all=True, append_images=pictures[1:], resolution=float(dpi))
    return out.getvalue(), words


def words_found(drawn: list[str], text: str) -> float:
    """The share of ``drawn`` found in ``text`` in order (a longest common subsequence of words)."""
    read = re.findall(r"[a-z]+", text.lower())
    previous = [0] * (len(read) + 1)
    for word in drawn:
        current = [0] * (len(read) + 1)
        for index, seen in enumerate(read, 1):
            current[index] = (
                previous[index - 1] + 1 if seen == word else max(previous[index], current[index - 1])
            )
        previous = current
    return previous[-1] / len(drawn) if drawn else 0.0


def bench_ocr(
    *, pages: int, dpis: list[int], languages: tuple[str, ...], log: Callable[[str], None]
) -> list[OcrRow]:
    from documents.ingestion.extraction import ExtractionError, ExtractionLimits, OcrOptions
    from documents.ingestion.extraction.isolated import extract_isolated
    from documents.ingestion.extraction.ocr import tesseract_missing

    options = OcrOptions(languages=languages)
    missing = tesseract_missing(options)
    if missing:
        raise BenchInputError(f"OCR cannot run here: {missing}")
    rows = []
    for dpi in dpis:
        data, drawn = scanned_pages(pages=pages, dpi=dpi)
        log(f"bench-ocr: {pages} pages at {dpi} dpi ({len(data) / 1024:,.0f} KB)")
        started = time.perf_counter()
        try:
            extracted = extract_isolated(
                data,
                filename=f"scan-{dpi}dpi.pdf",
                limits=ExtractionLimits(max_pages=max(pages, 1)),
                ocr=options,
            )
        except ExtractionError as error:
            raise BenchInputError(f"{dpi} dpi: {error.message}") from None
        seconds = time.perf_counter() - started
        rows.append(
            OcrRow(
                dpi=dpi,
                pages=pages,
                seconds=round(seconds, 2),
                pages_per_second=round(pages / seconds, 3),
                words=len(drawn),
                words_found=round(words_found(drawn, extracted.text), 4),
                original_kb=round(len(data) / 1024, 1),
                text_layer_kb=round(len(extracted.text_layer) / 1024, 1),
                languages="+".join(languages),
            )
        )
    return rows


def format_ocr(rows: list[OcrRow]) -> str:
    lines = [
        "| scan | pages | seconds | pages/s | words found | original (KB) | text layer kept (KB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.dpi} dpi, {row.languages} | {row.pages} | {row.seconds:.1f} | {row.pages_per_second:.2f} | "
            f"{row.words_found:.1%} of {row.words} | {row.original_kb:,.0f} | {row.text_layer_kb:,.0f} |"
        )
    return "\n".join(lines) + "\n"
