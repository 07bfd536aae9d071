"""The LLM tree builder: boundary-marker chunking, then a validated JSON tree, per part.

No Django here: the client is anything with ``complete_json_many`` and ``context_window``
(``openfable.llm.LLMClient`` in production). Every failure that retrying cannot fix raises
``LLMBuildFailed`` with the reason; the pipeline then falls back to the structural builder
and records that reason on the job.

1. Chunking: the text goes in overlapping windows sized from the model's context window; for
   each window the model names the verbatim opening words of its chunks; code finds them
   (``boundaries.locate_markers``) and the windows' boundaries are merged with no duplicate
   and no gap (``windows.merge_boundaries``). Windows run concurrently.
2. Tree: chunks are partitioned so each part's listing fits the context window; one tree per
   part (concurrently), validated by ``tree_schema.tree_from_json``; an invalid answer is
   retried with the validation message fed back. Several parts are merged under one root
   whose title and summary the model writes from the parts' titles and summaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from documents.ingestion.boundaries import MarkerNotFoundError, chunk_spans, locate_markers
from documents.ingestion.prompts import (
    chunking_messages,
    chunking_schema,
    feedback_messages,
    merge_messages,
    tree_messages,
)
from documents.ingestion.tree import TreeNode
from documents.ingestion.tree_schema import (
    MARKERS_JSON_SCHEMA,
    ROOT_JSON_SCHEMA,
    TREE_JSON_SCHEMA,
    AnswerError,
    merge_part_trees,
    parse_marker_answer,
    parse_root_answer,
    tree_from_json,
)
from documents.ingestion.windows import make_windows, merge_boundaries

if TYPE_CHECKING:
    from openfable.llm import LLMUsage

Span = tuple[int, int]
Progress = Callable[[str, float], None]

# Rough sizes used to fit prompts into the context window (cl100k tokens ≈ 4 characters).
_CHARS_PER_TOKEN = 4
_TOKENS_PER_LISTED_CHUNK = 70  # "#12 (85 words): <40 words>" per chunk in the tree prompt
_PROMPT_SHARE_OF_CONTEXT = 0.5  # leave the rest for instructions and the answer
_MAX_WINDOW_TOKENS = 6000  # longer windows make models skip boundaries
# Each answer's length, bounded: several times what a valid answer needs (a window's markers are
# ~20 tokens each for at most ~80 chunks; a part's tree lists each chunk once, with a title and a
# summary per section), so a good model never meets the bound, and a small one that rambles on
# (Gemma 3 270M: until its 180 s timeout) is cut off, re-asked, and falls back in bounded time.
# Where the server constrains decoding by the schema, its length bounds (``tree_schema``) end a
# rambling answer sooner: a window's markers are at most ~40 of at most 100 characters each.
ANSWER_MAX_TOKENS = {"chunk_markers": 3000, "document_tree": 6000, "document_root": 1000}


class LLMBuildFailed(Exception):
    """The LLM could not produce a valid tree; ``str(error)`` says why (it goes on the job)."""


class JSONCompleter(Protocol):
    def context_window(self) -> int: ...

    def complete_json_many(self, requests: Sequence[Any]) -> list[Any]: ...


@dataclass
class LLMBuildResult:
    root: TreeNode
    chunks: list[Span]
    usage: LLMUsage
    notes: list[str] = field(default_factory=list)


@dataclass
class _Task:
    """One conversation that may need several rounds (validation feedback)."""

    index: int
    messages: list[dict[str, Any]]
    attempts: int = 0
    result: Any = None
    last_error: str = ""
    schema: dict[str, Any] | None = None  # this conversation's own schema, if not the step's


class LLMBuilder:
    def __init__(
        self,
        client: JSONCompleter,
        *,
        request_factory: Callable[..., Any],
        validation_retries: int = 2,
        progress: Progress | None = None,
    ) -> None:
        from openfable.llm import LLMUsage  # the client's own types; imported lazily

        # request_factory builds the client's request objects (openfable.llm.LLMRequest);
        # injected so this module needs no import of the client.
        self._client = client
        self._request = request_factory
        self._retries = validation_retries
        self._progress = progress or (lambda stage, fraction: None)
        self.usage = LLMUsage()

    # -- public ---------------------------------------------------------------------------

    def build(self, text: str, *, title: str = "") -> LLMBuildResult:
        context = max(2048, int(self._client.context_window()))
        self._progress("chunking", 0.0)
        chunks = self.chunk(text, context=context)
        self._progress("building_tree", 0.0)
        root = self.tree(text, chunks, context=context, title=title)
        return LLMBuildResult(root=root, chunks=chunks, usage=self.usage)

    def chunk(self, text: str, *, context: int) -> list[Span]:
        window_tokens = min(_MAX_WINDOW_TOKENS, int(context * _PROMPT_SHARE_OF_CONTEXT))
        window_chars = window_tokens * _CHARS_PER_TOKEN
        if len(text) <= window_chars:
            windows = [(0, len(text))]
        else:
            windows = make_windows(text, window_chars=window_chars, overlap_chars=window_chars // 10)
        partial = len(windows) > 1
        tasks = [
            _Task(
                index,
                chunking_messages(text[start:end], is_partial=partial),
                schema=chunking_schema(text[start:end]),
            )
            for index, (start, end) in enumerate(windows)
        ]

        def accept(task: _Task, data: Any) -> Any:
            start, end = windows[task.index]
            markers = parse_marker_answer(data)
            return locate_markers(text, markers, start=start, end=end)

        offsets = self._run(
            tasks, accept, schema=MARKERS_JSON_SCHEMA, name="chunk_markers", what="chunking window"
        )
        boundaries = merge_boundaries(windows, offsets)
        spans = chunk_spans(text, boundaries)
        if not spans:
            raise LLMBuildFailed("chunking produced no chunks")
        return spans

    def tree(self, text: str, chunks: Sequence[Span], *, context: int, title: str = "") -> TreeNode:
        per_part = max(8, int(context * _PROMPT_SHARE_OF_CONTEXT) // _TOKENS_PER_LISTED_CHUNK)
        parts = _partition(list(chunks), per_part)
        labels = [f"part {n + 1} of {len(parts)}" if len(parts) > 1 else None for n in range(len(parts))]
        tasks = [
            _Task(
                index, tree_messages(text=text, chunks=part, document_title=title or None, part_label=label)
            )
            for index, (part, label) in enumerate(zip(parts, labels, strict=True))
        ]

        def accept(task: _Task, data: Any) -> TreeNode:
            return tree_from_json(data, text=text, chunks=parts[task.index])

        part_trees: list[TreeNode] = self._run(
            tasks, accept, schema=TREE_JSON_SCHEMA, name="document_tree", what="tree of part"
        )
        if len(part_trees) == 1:
            return part_trees[0]
        self._progress("building_tree", 0.9)
        root_task = _Task(
            0, merge_messages([(tree.title, tree.summary) for tree in part_trees], document_title=title)
        )
        ((root_title, root_summary),) = self._run(
            [root_task],
            lambda task, data: parse_root_answer(data),
            schema=ROOT_JSON_SCHEMA,
            name="document_root",
            what="root title and summary",
        )
        return merge_part_trees(part_trees, title=root_title, summary=root_summary, text=text)

    # -- the retry loop -------------------------------------------------------------------

    def _run(
        self,
        tasks: list[_Task],
        accept: Callable[[_Task, Any], Any],
        *,
        schema: dict[str, Any],
        name: str,
        what: str,
    ) -> list[Any]:
        """Send every task; re-ask the ones whose answer is invalid, feeding the error back.

        Rounds run the pending tasks concurrently. A transient failure that outlived the
        client's own retries, or an answer still invalid after ``validation_retries``
        re-asks, fails the whole build.
        """
        from openfable.llm import (  # the client's own types; imported lazily
            Fallback,
            LLMOutputError,
            LLMUsage,
            count_fallback,
        )

        pending = list(tasks)
        while pending:
            requests = [
                self._request(
                    messages=t.messages,
                    schema=t.schema or schema,
                    schema_name=name,
                    purpose=name,
                    max_tokens=ANSWER_MAX_TOKENS[name],
                )
                for t in pending
            ]
            answers = self._client.complete_json_many(requests)
            still_pending: list[_Task] = []
            for task, answer in zip(pending, answers, strict=True):
                task.attempts += 1
                if isinstance(answer, LLMOutputError):
                    self.usage = self.usage.plus(LLMUsage.of(answer))
                    error, raw = f"the answer was not valid JSON ({answer})", answer.text
                elif isinstance(answer, Exception):
                    raise LLMBuildFailed(f"{what} {task.index + 1}: {answer}") from answer
                else:
                    self.usage = self.usage.plus(LLMUsage.of(answer))
                    try:
                        task.result = accept(task, answer.data)
                        continue
                    except (AnswerError, MarkerNotFoundError, ValueError) as invalid:
                        error, raw = str(invalid), answer.text
                task.last_error = error
                if task.attempts > self._retries:
                    raise LLMBuildFailed(
                        f"{what} {task.index + 1} still invalid after {task.attempts} attempts: {error}"
                    )
                count_fallback(Fallback.TREE_REASK)
                task.messages = feedback_messages(task.messages, answer=raw, error=error)
                still_pending.append(task)
            pending = still_pending
        return [task.result for task in tasks]


def _partition(chunks: list[Span], per_part: int) -> list[list[Span]]:
    """Split into consecutive, nearly equal parts of at most ``per_part`` chunks."""
    count = max(1, -(-len(chunks) // per_part))
    size = -(-len(chunks) // count)
    return [chunks[i : i + size] for i in range(0, len(chunks), size)]
