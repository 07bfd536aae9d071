"""``extract`` in a child process with a memory cap and a hard time limit (pure, no Django).

PDFium is C: a page whose streams inflate to gigabytes (a decompression bomb) or that loops
inside the library is out of reach of ``extract``'s own checks, which run between pages. The
worker calls ``extract_isolated`` instead: the child caps its address space (``RLIMIT_AS``) and
is killed when the time limit passes, and either ends as one ``ExtractionError``.

The child is a fresh interpreter started with ``subprocess`` (``spawn_isolated``), not a
``multiprocessing`` process: a Celery prefork worker's pool processes are daemonic, and
``multiprocessing`` refuses children to those. It gets its arguments pickled on its standard
input and answers over a pipe of its own, so nothing a library prints can garble the answer.
``run_isolated`` starts, times and reaps it; drawing a page for the document page
(``pdf_pages.render_page_png_isolated``) runs through it too.
"""

from __future__ import annotations

import importlib
import os
import pickle
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from documents.ingestion.extraction.model import (
    DOCX,
    HTML,
    PDF,
    Extracted,
    ExtractionError,
    ExtractionLimits,
    OcrOptions,
    Progress,
)

_MEGABYTE = 1024 * 1024
# The library that reads each format, loaded by the child before it caps its memory.
_READERS = {
    PDF: "documents.ingestion.extraction.pdf_pdfium",  # pypdfium2
    DOCX: "docx",  # python-docx
    HTML: "selectolax.lexbor",
}
_TEXT_READER = "documents.ingestion.extraction.assemble"  # Markdown, text: no library of their own


def extract_isolated(
    data: bytes,
    *,
    filename: str,
    limits: ExtractionLimits | None = None,
    max_memory_bytes: int = 2048 * _MEGABYTE,
    grace_seconds: float = 10.0,
    on_progress: Progress | None = None,
    ocr: OcrOptions | None = None,
    on_recognise: Progress | None = None,
) -> Extracted:
    """``extract(data, filename=..., limits=..., ocr=...)`` in a fresh process that may allocate
    ``max_memory_bytes`` beyond what it holds once started, and is killed after
    ``limits.max_seconds`` (plus ``grace_seconds`` for it to start), plus
    ``ocr.seconds_per_page`` for each page it reads by OCR (Tesseract, its child, inherits the
    memory cap). ``on_recognise(done, total)`` hears of each page recognised."""
    limits = limits or ExtractionLimits()
    try:
        kind, payload = run_isolated(
            f"{__name__}:_child",
            (data, filename, limits, max_memory_bytes, ocr),
            max_seconds=limits.max_seconds + grace_seconds,
            on_progress=on_progress,
            # Always heard, so that it is never taken for the answer.
            listeners={"recognising": on_recognise or _ignore},
            # The child asks for the OCR's time once it knows how many pages need it; never
            # more than every page allowed would take.
            max_more_seconds=ocr.seconds_per_page * limits.max_pages if ocr is not None else 0.0,
        )
    except ChildTooSlow as slow:
        raise _too_slow(filename, slow.seconds - grace_seconds) from None
    except ChildStopped as stopped:
        if stopped.killed:
            raise _too_big(filename, max_memory_bytes) from None
        raise ExtractionError(
            _unreadable(filename, RuntimeError("the reader stopped")), code="corrupt"
        ) from None
    if kind == "ok":
        result: Extracted = payload
        return result
    if kind == "memory":
        raise _too_big(filename, max_memory_bytes)
    message, code = payload
    raise ExtractionError(message, code=code)


def _ignore(*_: object) -> None:
    return None


class ChildTooSlow(Exception):
    """The child gave no answer within its time (``seconds``, with any it was granted more);
    it has been killed."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} seconds")
        self.seconds = seconds


class ChildStopped(Exception):
    """The child ended without an answer; ``killed``: by a signal (the kernel's OOM killer, or a
    C library aborting on a failed allocation), so most likely out of memory."""

    def __init__(self, *, killed: bool) -> None:
        super().__init__("killed by a signal" if killed else "ended without an answer")
        self.killed = killed


def run_isolated(
    target: str,
    args: tuple[Any, ...],
    *,
    max_seconds: float,
    on_progress: Callable[..., None] | None = None,
    listeners: Mapping[str, Callable[..., None]] | None = None,
    max_more_seconds: float = 0.0,
) -> tuple[str, Any]:
    """Run ``target`` in a fresh interpreter (``spawn_isolated``) and return its answer, the
    first message that is not ``("progress", args)`` (those go to ``on_progress``), nor of a
    kind in ``listeners`` (``(kind, args)`` goes to ``listeners[kind]``), nor ``("more_time",
    seconds)``: the child asking for more time (pages to OCR), granted up to
    ``max_more_seconds`` in all. The child is killed after ``max_seconds`` and what it was
    granted (``ChildTooSlow``) and never outlives this call; one that ends without answering
    raises ``ChildStopped``. Extraction and page drawing both run here, so they share one way
    of starting, timing and reaping a child."""
    child, receiver = spawn_isolated(target, args)
    clock = _ChildClock.starting(max_seconds, max_more_seconds)
    try:
        return _answer(receiver, clock, _Listeners(on_progress, listeners or {}))
    except EOFError:
        child.wait()
        raise ChildStopped(killed=child.returncode is not None and child.returncode < 0) from None
    finally:
        receiver.close()
        if child.poll() is None:
            child.kill()
        child.wait()


@dataclass
class _ChildClock:
    """The child's time: what it is allowed in all (``ChildTooSlow`` says so), when that runs
    out, and how much more it may still be granted."""

    allowed: float
    expires: float
    grantable: float

    @classmethod
    def starting(cls, max_seconds: float, max_more_seconds: float) -> _ChildClock:
        allowed = max(0.0, max_seconds)
        return cls(allowed, time.monotonic() + allowed, max(0.0, max_more_seconds))

    def left(self) -> float:
        return max(0.0, self.expires - time.monotonic())

    def grant(self, asked: float) -> None:
        """More time, as the child asked (``("more_time", seconds)``), up to what is grantable."""
        granted = min(self.grantable, max(0.0, asked))
        self.grantable -= granted
        self.allowed += granted
        self.expires += granted


@dataclass(frozen=True)
class _Listeners:
    """Who hears the child's messages that are not its answer (``run_isolated``)."""

    on_progress: Callable[..., None] | None
    by_kind: Mapping[str, Callable[..., None]]

    def hear(self, kind: str, payload: Any) -> bool:
        """Pass a message on; False when no one listens to its kind: then it is the answer."""
        if kind == "progress":
            if self.on_progress is not None:
                self.on_progress(*payload)
            return True
        if kind in self.by_kind:
            self.by_kind[kind](*payload)
            return True
        return False


def _answer(receiver: Connection, clock: _ChildClock, listeners: _Listeners) -> tuple[str, Any]:
    """The child's first message that is its answer; ``ChildTooSlow`` when its time runs out."""
    while True:
        if not receiver.poll(clock.left()):
            raise ChildTooSlow(clock.allowed)
        kind, payload = receiver.recv()
        if kind == "more_time":
            clock.grant(float(payload))
        elif not listeners.hear(kind, payload):
            return kind, payload


# The folder that holds the ``documents`` package: the child imports the reader from it.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[3])


def spawn_isolated(target: str, args: tuple[Any, ...]) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start ``target`` ("module:function") in a fresh interpreter as ``function(sender, *args)``;
    the process, and the end of the pipe its messages (``sender.send``) arrive on."""
    read_end, write_end = os.pipe()
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        path for path in (_IMPORT_ROOT, environment.get("PYTHONPATH", "")) if path
    )
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, str(write_end)],
            stdin=subprocess.PIPE,
            pass_fds=(write_end,),
            env=environment,
            close_fds=True,
        )
    finally:
        os.close(write_end)
    receiver = Connection(read_end, writable=False)
    assert child.stdin is not None
    try:
        pickle.dump((target, args), child.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        child.stdin.close()
    except BrokenPipeError:  # it died before reading: the caller reads EOF and says so
        pass
    return child, receiver


def _main() -> None:
    """The child's entry point (``python -m ...isolated FD``): run the target it is sent."""
    sender = Connection(int(sys.argv[1]), readable=False)
    target, args = pickle.load(sys.stdin.buffer)
    module, function = target.split(":")
    getattr(importlib.import_module(module), function)(sender, *args)


def _child(
    sender: Connection,
    data: bytes,
    filename: str,
    limits: ExtractionLimits,
    max_memory_bytes: int,
    ocr: OcrOptions | None,
) -> None:
    from documents.ingestion.extraction import extract
    from documents.ingestion.extraction.detect import detect_format

    # The file's reader loads before the cap, so the cap bounds the reading alone. Only that
    # one: a child is started per file, and each library is an import on every start (the three
    # readers and OCRmyPDF took 0.3 s a file: reading the 50 dev contracts took 47.7 s with
    # them, 33.9 s without). OCRmyPDF loads once a page needs it (its 67 MB then count against
    # the cap's 2 GB).
    importlib.import_module(_READERS.get(detect_format(data, filename=filename).format, _TEXT_READER))
    answer: tuple[str, Any]
    try:
        cap_memory(max_memory_bytes)
        answer = (
            "ok",
            extract(
                data,
                filename=filename,
                limits=limits,
                on_progress=lambda done, total: sender.send(("progress", (done, total))),
                ocr=ocr,
                on_recognise=lambda done, total: sender.send(("recognising", (done, total))),
                on_more_time=lambda seconds: sender.send(("more_time", seconds)),
            ),
        )
    except ExtractionError as error:
        answer = ("error", (error.message, error.code))
    except MemoryError:
        answer = ("memory", None)
    except Exception as error:  # a bug or a file no reader expected: a sentence, not a traceback
        answer = ("error", (_unreadable(filename, error), "corrupt"))
    sender.send(answer)
    sender.close()


def cap_memory(max_memory_bytes: int) -> None:
    """The address space it has now (interpreter, libraries), plus ``max_memory_bytes``."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[0])
    except OSError:  # not Linux: the time limit still holds
        return
    current = pages * resource.getpagesize()
    limit = current + max_memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _too_slow(filename: str, seconds: float) -> ExtractionError:
    return ExtractionError(
        f"{filename}: reading the file took longer than {seconds:g} seconds; "
        "split it into smaller files and upload them again",
        code="too_slow",
    )


def _too_big(filename: str, max_memory_bytes: int) -> ExtractionError:
    return ExtractionError(
        f"{filename} needs more than {max_memory_bytes // _MEGABYTE:,} MB of memory to read "
        "(a decompression bomb?); split it or export it again, and upload it again",
        code="too_large",
    )


def _unreadable(filename: str, error: Exception) -> str:
    return (
        f"{filename} could not be read ({type(error).__name__}); save or export it again and upload it again"
    )


if __name__ == "__main__":
    _main()
