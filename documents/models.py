"""The corpus: collections of documents, each indexed as a tree of embedded nodes."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, Q, Value, When
from django.db.models.functions import Concat
from django.urls import reverse
from pgvector.django import HnswIndex, VectorField

from documents.ingestion import tree
from documents.ingestion.extraction import model as extraction

# PostgreSQL text search configuration of the lexical path (stemming, stop words).
SEARCH_CONFIG = "english"


class Collection(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_collections",
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="collections")
    # Where the owner's documents go when they name no collection (the ownerless one: the
    # superusers' and the command line's). Bound to the owner, never found by slug, so a
    # collection someone else made with a look-alike slug can never become it.
    is_default = models.BooleanField(default=False, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner"],
                condition=Q(is_default=True),
                nulls_distinct=False,
                name="collection_one_default_per_owner",
            )
        ]

    def __str__(self) -> str:
        return self.name


class CollectionInvitation(models.Model):
    """An owner's offer to share a collection with someone; they become a member when they accept.

    Until then the collection is not theirs to see: its documents are in none of their queries or
    lists, so a stranger cannot plant a document in someone's results by adding them as a member
    (``documents.services.sharing``).

    An invitation names a person by ``username``. One to a name that has no account yet is kept
    all the same (``user`` empty), so that an owner's answer never says which names have
    accounts; it reaches whoever later has that name, as an offer they may decline. A declined
    one is kept (``declined``) for ``INVITATION_DECLINED_DAYS``: the owner cannot send it again
    at once.
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="collection_invitations",
    )
    username = models.CharField(max_length=150)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    declined = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "username"], name="collection_invitation_once")
        ]
        indexes = [models.Index(fields=["username"], name="invitation_username")]

    def __str__(self) -> str:
        return f"{self.username} to {self.collection}"


def _original_path(document: Document, filename: str) -> str:
    # By content: two uploads of one file share a folder, and a name says nothing of the owner.
    return f"originals/{document.content_hash[:2]}/{document.content_hash}/{filename[-200:]}"


def _text_layer_path(document: Document, filename: str) -> str:
    # Beside nothing else of the document's: one per document and reading (the storage adds a
    # suffix when the name is taken), removed with the document or when a new reading replaces it.
    return f"text-layers/{document.content_hash[:2]}/{document.content_hash}/{filename[-200:]}"


class Document(models.Model):
    class Format(models.TextChoices):
        # The formats extraction reads (documents.ingestion.extraction), told from the content.
        PDF = extraction.PDF, "PDF"
        DOCX = extraction.DOCX, "Word (.docx)"
        HTML = extraction.HTML, "HTML"
        MARKDOWN = extraction.MARKDOWN, "Markdown"
        TEXT = extraction.TEXT, "text"

    class Status(models.TextChoices):
        QUEUED = "queued"
        INDEXING = "indexing"
        INDEXED = "indexed"
        FAILED = "failed"

    class Builder(models.TextChoices):
        LLM = "llm"
        STRUCTURAL = "structural"
        AGENT = "agent"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=500)
    source_filename = models.CharField(max_length=500, blank=True)
    content = models.TextField(
        blank=True, help_text="the text every node points into; empty until a file's text is extracted"
    )
    content_hash = models.CharField(
        max_length=64, help_text="sha256 of the content, or of the original file's bytes"
    )
    # The file as uploaded (PDF, Word, HTML): downloaded as it came, its pages shown, read again
    # on a re-index. Empty for text sent as text or as a .txt/.md file: the content is the original.
    original = models.FileField(upload_to=_original_path, blank=True, max_length=500)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.TEXT)
    # The page map: [[page, start, end], ...], page ``page`` (1-based) is content[start:end],
    # in order. Empty for a text without pages.
    page_spans = models.JSONField(default=list, blank=True)
    format_note = models.TextField(
        blank=True, help_text="said when the file's name and its content disagree (read by content)"
    )
    # The pages (1-based) of a PDF whose text was recognised from their picture (OCR), and the
    # PDF of those pages, in that order, with the recognised text placed over them: the
    # document page finds a passage's lines there (the original has no text on those pages).
    recognised_pages = models.JSONField(
        default=list, blank=True, help_text="pages whose text was read by OCR from the page's picture"
    )
    text_layer = models.FileField(upload_to=_text_layer_path, blank=True, max_length=500)
    token_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    builder = models.CharField(max_length=16, choices=Builder.choices, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    tree_version = models.PositiveIntegerField(
        default=0, help_text="moves on every edit and replacement of the tree (optimistic concurrency)"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "content_hash"], name="document_content_unique_per_collection"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "indexing", "indexed", "failed"]),
                name="document_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(builder__in=["", "llm", "structural", "agent"]), name="document_builder_valid"
            ),
            models.CheckConstraint(
                condition=Q(format__in=list(extraction.FORMATS)), name="document_format_valid"
            ),
        ]
        indexes = [GinIndex(fields=["tags"], name="document_tags_gin")]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("documents:detail", args=[self.pk])

    def pages_of(self, start: int, end: int) -> list[int]:
        """The pages ``content[start:end]`` lies on ([] for a text without pages)."""
        return pages_of(self.page_spans, start, end)


# Formats whose text the worker extracts from the stored original (the job's "extracting"
# stage); Markdown and text are their own text, stored as it comes.
FILE_FORMATS = frozenset({extraction.PDF, extraction.DOCX, extraction.HTML})


def pages_of(page_spans: Sequence[Sequence[int]], start: int, end: int) -> list[int]:
    """The pages of ``page_spans`` (a Document's page map) that ``[start, end)`` touches; an empty
    range is on the page it falls in. One rule for nodes and retrieved chunks on every surface."""
    return page_finder(page_spans)(start, end)


def page_finder(page_spans: Sequence[Sequence[int]]) -> Callable[[int, int], list[int]]:
    """``pages_of`` for many ranges of one document: the page starts are read once, then each
    range is two binary searches (a tree of a 2,000-page PDF has thousands of nodes)."""
    spans = [tuple(span) for span in page_spans]
    starts = [span[1] for span in spans]

    def find(start: int, end: int) -> list[int]:
        if not spans:
            return []
        first = max(0, bisect.bisect_right(starts, start) - 1)
        last = max(first, bisect.bisect_left(starts, max(start + 1, end)) - 1)
        # A blank page (an empty span) inside the range is still one of its pages.
        return [spans[index][0] for index in range(first, last + 1)]

    return find


# The corpus-wide HNSW index of Node.embedding, and the per-collection partial ones
# (documents.services.collection_indexes) named after it.
HNSW_INDEX_NAME = "node_embedding_hnsw"
COLLECTION_INDEX_PREFIX = f"{HNSW_INDEX_NAME}_c"


def collection_index_name(collection_id: int) -> str:
    return f"{COLLECTION_INDEX_PREFIX}{int(collection_id)}"


class Node(models.Model):
    class Kind(models.TextChoices):
        # The one set of kind names, shared with the pure tree code (documents.ingestion.tree).
        ROOT = tree.ROOT
        SECTION = tree.SECTION
        SUBSECTION = tree.SUBSECTION
        LEAF = tree.LEAF

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="nodes")
    # The document's collection, copied by a database trigger on every insert (migration 0010),
    # so no writer can leave it wrong: the per-collection HNSW indexes are partial indexes on it
    # (documents.services.collection_indexes). Never set it from Python.
    collection = models.ForeignKey(
        Collection,
        null=True,
        editable=False,
        on_delete=models.DO_NOTHING,  # the node goes with its document
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    depth = models.PositiveSmallIntegerField()
    ordinal = models.PositiveIntegerField(help_text="position among its siblings")
    order = models.PositiveIntegerField(help_text="position in the document's pre-order traversal")
    title = models.CharField(max_length=500, blank=True)
    summary = models.TextField(blank=True)
    toc_path = models.TextField(blank=True, help_text='readable path: "Title › Section › Subsection"')
    start_char = models.PositiveIntegerField()
    end_char = models.PositiveIntegerField()
    content = models.TextField(
        blank=True, help_text="a leaf's text: exactly document.content[start_char:end_char]"
    )
    token_count = models.PositiveIntegerField(default=0)
    # Dimensions follow OPENFABLE_EMBEDDING_DIMENSIONS; `manage.py openfable reembed` changes
    # the column when the model changes (see the system check openfable.E005).
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    edited = models.BooleanField(default=False, help_text="a person changed its title or summary")
    embedding_stale = models.BooleanField(
        default=False, help_text="an edit changed the text it is embedded from; a worker is re-embedding it"
    )
    excluded = models.BooleanField(
        default=False,
        help_text="left out of retrieval: a person excluded it or a node above it (set on the whole subtree)",
    )
    # The lexical path's terms (english stemming): a leaf's own text, an internal node's title
    # and summary -- what each node says, never its descendants' text twice. Computed by
    # PostgreSQL on every write, so it can never disagree with the text.
    search = models.GeneratedField(
        expression=Case(
            When(kind=tree.LEAF, then=SearchVector("content", config=SEARCH_CONFIG)),
            default=SearchVector(
                Concat("title", Value(" "), "summary", output_field=models.TextField()), config=SEARCH_CONFIG
            ),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["document", "order"]
        constraints = [
            # Checked at the end of each statement, not row by row, and a tree edit defers it to the
            # end of its write: renumbering moves every later node one place on in one pass.
            models.UniqueConstraint(
                fields=["document", "order"],
                name="node_order_unique_per_document",
                deferrable=models.Deferrable.IMMEDIATE,
            ),
            models.UniqueConstraint(
                fields=["document"], condition=Q(kind=tree.ROOT), name="node_one_root_per_document"
            ),
            models.CheckConstraint(condition=Q(kind__in=list(tree.KINDS)), name="node_kind_valid"),
            models.CheckConstraint(condition=Q(depth__gte=0, depth__lte=4), name="node_depth_range"),
            models.CheckConstraint(
                condition=(
                    Q(kind=tree.ROOT, depth=0, parent__isnull=True) | (~Q(kind=tree.ROOT) & Q(depth__gte=1))
                ),
                name="node_root_at_depth_zero",
            ),
            models.CheckConstraint(
                condition=Q(kind=tree.ROOT) | Q(parent__isnull=False), name="node_non_root_has_parent"
            ),
            models.CheckConstraint(
                condition=~Q(kind=tree.SECTION) | Q(depth=1), name="node_section_at_depth_one"
            ),
            models.CheckConstraint(
                condition=~Q(kind=tree.SUBSECTION) | Q(depth__gte=2, depth__lte=3),
                name="node_subsection_depth",
            ),
            models.CheckConstraint(
                condition=Q(start_char__lte=models.F("end_char")), name="node_span_ordered"
            ),
        ]
        indexes = [
            HnswIndex(
                name=HNSW_INDEX_NAME,
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["document", "kind", "depth"], name="node_document_kind_depth"),
            GinIndex(fields=["search"], name="node_search_gin"),
            # Few nodes are excluded: "does this document have any" stays an index probe.
            models.Index(fields=["document"], condition=Q(excluded=True), name="node_excluded_document"),
            # The documents a query can search (a root not excluded): read from the index alone by
            # the lexical path's scope, never from the wide node rows (docs/benchmarks.md, "Latency on real
            # corpora": the searchable documents read from their own index).
            models.Index(
                fields=["document"], condition=Q(kind=tree.ROOT, excluded=False), name="node_searchable_root"
            ),
        ]

    def __str__(self) -> str:
        return self.toc_path or self.title or f"{self.kind} {self.pk}"


class TreeEdit(models.Model):
    """One edit a person made to a document's tree, with what it changed, so it can be undone.

    ``before`` and ``after`` hold one row per node the edit touched: ``id`` plus the fields that
    changed (``documents.tree_edits.STATE_FIELDS``), or every field for a node the edit
    created (``after`` only) or deleted (``before`` only). A ``before`` row also carries the
    node's ``embedding`` (a list of floats) when the edit deleted the node or changed the text it
    is embedded from, so undoing restores the vector instead of computing it again.
    A re-index replaces every node, so it clears the document's edits.
    """

    class Operation(models.TextChoices):
        UPDATE = "update"
        SPLIT = "split"
        MERGE = "merge"
        MOVE = "move"
        GROUP = "group"
        DISSOLVE = "dissolve"
        EXCLUDE = "exclude"
        INCLUDE = "include"

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="tree_edits")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="tree_edits"
    )
    created = models.DateTimeField(auto_now_add=True)
    operation = models.CharField(max_length=16, choices=Operation.choices)
    arguments = models.JSONField(default=dict, blank=True, help_text="what the edit was asked to do")
    before = models.JSONField(default=list, blank=True, help_text="the touched nodes as they were")
    after = models.JSONField(default=list, blank=True, help_text="the touched nodes as the edit left them")
    tree_version = models.PositiveIntegerField(help_text="the document's tree version this edit made")
    embedding_model = models.CharField(
        max_length=200, blank=True, help_text="the model of the vectors kept in before"
    )
    undone = models.BooleanField(default=False)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["document", "-id"], name="tree_edit_document_latest")]

    def __str__(self) -> str:
        return f"{self.operation} on {self.document_id}" + (" (undone)" if self.undone else "")


class DocumentTerm(models.Model):
    """The lexical path's inverted index: how often each search term occurs in a document's leaves.

    Derived from the leaves' ``Node.search`` by ``documents.services.search_index``
    whenever a tree is written. Document-level BM25 reads only the rows of the query's terms
    through the (term, document) index, never the wide node rows; node-level BM25 reads the
    nodes' own tsvectors.
    """

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="terms")
    term = models.TextField(help_text="a lexeme as the search configuration stems it")
    frequency = models.PositiveIntegerField(help_text="occurrences in the document's leaves")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["term", "document"], include=["frequency"], name="document_term_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.term} x{self.frequency} in document {self.document_id}"


class SearchableDocument(models.Model):
    """A document a query can search (it has a root not excluded from retrieval), with what
    document-level BM25 reads of it: its collection and its length. Kept by
    ``documents.services.search_index`` with the postings, so a query's scope is read from
    these narrow rows alone, never from the documents and their roots."""

    document = models.OneToOneField(
        Document, on_delete=models.CASCADE, primary_key=True, related_name="searchable"
    )
    collection = models.ForeignKey(  # the document's, copied; no constraint: see ``CollectionTerm``
        Collection, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    length = models.PositiveIntegerField(help_text="the document's token count")

    def __str__(self) -> str:
        return f"document {self.document_id} (length {self.length})"


class CollectionTerm(models.Model):
    """The term dictionary: how many searchable documents of a collection hold a term (its
    document frequency), summed from ``DocumentTerm`` by ``documents.services.search_index`` in
    the transaction that changes it. Document-level BM25 over whole collections reads a common
    term's frequency from one row instead of counting its postings. A row may hold 0 (the term
    left every document of the collection): harmless, and gone with the collection."""

    # No constraint in the database (the rows go with their collection all the same, by the
    # ORM's cascade): its deferred check at the commit of a tree swap would lock the collection
    # after the document, the opposite of the order a collection's deletion takes (a deadlock).
    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, db_constraint=False, related_name="terms"
    )
    term = models.TextField(help_text="a lexeme as the search configuration stems it")
    # Not Positive: the index is kept by adding signed changes (ON CONFLICT DO UPDATE), and
    # PostgreSQL checks a row's constraints before it finds the conflict.
    documents = models.IntegerField(help_text="searchable documents of the collection holding the term")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["term", "collection"], include=["documents"], name="collection_term_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.term} in {self.documents} documents of collection {self.collection_id}"


class CollectionSearchStats(models.Model):
    """BM25's collection statistics: how many of a collection's documents a query can search, and
    their total length (sums over ``SearchableDocument``), kept with ``CollectionTerm``."""

    collection = models.OneToOneField(  # no database constraint: see ``CollectionTerm``
        Collection,
        on_delete=models.CASCADE,
        primary_key=True,
        db_constraint=False,
        related_name="search_stats",
    )
    documents = models.IntegerField(default=0)
    tokens = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"collection {self.collection_id}: {self.documents} searchable documents"


class IngestionJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    class Stage(models.TextChoices):
        QUEUED = "queued"
        EXTRACTING = "extracting", "reading the file"
        RECOGNISING = "recognising", "recognising text"
        CHUNKING = "chunking"
        BUILDING_TREE = "building_tree", "building the tree"
        EMBEDDING = "embedding"
        SAVING = "saving"
        DONE = "done"

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="jobs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="percent")
    # Within the current stage, for the corpus page's words and its time-left estimate
    # (documents.progress_words): items done of items in it (0 of 0: a stage that reports only
    # a fraction), and when the stage began.
    stage_done = models.PositiveIntegerField(default=0)
    stage_total = models.PositiveIntegerField(default=0)
    stage_started = models.DateTimeField(null=True, blank=True)
    builder_requested = models.CharField(max_length=16, blank=True)
    reindex = models.BooleanField(default=False)
    chunk_count = models.PositiveIntegerField(default=0)
    node_count = models.PositiveIntegerField(default=0)
    llm_calls = models.PositiveIntegerField(default=0)
    llm_cached_calls = models.PositiveIntegerField(default=0)
    llm_prompt_tokens = models.PositiveIntegerField(default=0)
    llm_completion_tokens = models.PositiveIntegerField(default=0)
    llm_cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    fallback_reason = models.TextField(
        blank=True, help_text="why the LLM builder gave way to the structural one"
    )
    error = models.TextField(blank=True)
    timings = models.JSONField(default=dict, blank=True, help_text="seconds per stage")
    # What the run cost the embedding model, against the size of the document: each passage
    # embedded once is about 1x; the internal nodes' texts and re-cut passages add to it.
    document_tokens = models.PositiveIntegerField(default=0, help_text="tokens of the document's text")
    embedded_tokens = models.PositiveIntegerField(
        default=0, help_text="tokens this run sent to the embedding model"
    )
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(
        null=True, blank=True, help_text="the last sign of life from the worker running it (claim, progress)"
    )
    worker = models.CharField(max_length=255, blank=True, help_text="host:pid of the process running it")
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        # The stalled-job sweep (documents.services.job_queue.jobs_fail_stalled) reads only running jobs.
        indexes = [
            models.Index(fields=["heartbeat"], condition=Q(status="running"), name="job_running_heartbeat")
        ]
        constraints = [
            models.CheckConstraint(condition=Q(progress__lte=100), name="job_progress_percent"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed"]), name="job_status_valid"
            ),
            # One build per document at a time: a second unfinished job is refused by the
            # database too, not only by documents.services.documents.document_reindex.
            models.UniqueConstraint(
                fields=["document"],
                condition=Q(status__in=["queued", "running"]),
                name="job_one_unfinished_per_document",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document} · {self.status}"


class AgentState(models.Model):
    """The agent path's working state between its steps (documents.services.agent).

    ``plan`` makes the row: a document has one exactly while it is in the agent path.
    ``apply-chunks`` keeps the chunk spans here until ``apply-tree`` builds over them; a tree
    from another builder deletes the row (the document left the path). Kept apart from
    ``Document.metadata``, which belongs to the user and is replaced whole by every edit.
    """

    document = models.OneToOneField(
        Document, on_delete=models.CASCADE, primary_key=True, related_name="agent_state"
    )
    # [[start, end], ...]: the chunks, in order, exactly covering the content; [] before apply-chunks.
    chunks = models.JSONField(default=list, blank=True)
    markers = models.PositiveIntegerField(default=0, help_text="markers the chunks were cut at")
    chunked = models.DateTimeField(null=True, blank=True)
    # The saved tree in the agent's JSON shape over the chunk indexes (None: the shape cannot say it).
    tree = models.JSONField(null=True, blank=True)
    tree_saved = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"agent state of document {self.document_id}"


class CorpusVersion(models.Model):
    """One row whose number moves on every write to the corpus.

    Query caches key on it, so a cached result can never outlive the corpus it was computed on.
    """

    version = models.BigIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"corpus version {self.version}"
