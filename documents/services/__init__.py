"""Writes to the corpus, split by what they write. Every surface (web pages, the admin, the REST
API, MCP, the command line) and every task goes through these functions. Only writes live here:
reads are in ``documents.selectors``, and the pure algorithms they use in ``documents.ingestion``,
``documents.tree_edits`` (the tree in memory) and ``documents.review`` (what needs a look).

Every module, by what it writes (tests/documents/test_services.py checks that none is missing):

- ``documents``: documents (create, update, delete, re-index, retry a job);
- ``document_input``: the rules document input keeps (text, files, titles, tags, metadata);
- ``collections``: collections (create, rename, share, hand over, delete) and each user's default;
- ``sharing``: a collection's invitations (invite, accept, decline) and its members;
- ``deletion``: what deleting documents takes besides their rows (nodes, stored files);
- ``users``: a deleted person's collections and documents, kept as the operator's;
- ``extracting``: an uploaded file's text, structure and pages, read from the original (a job's
  first stage), and ``ExtractedText``, what it read;
- ``jobs``: running an ingestion job (claim, progress, the pipeline ``document_index``);
- ``job_queue``: keeping jobs moving (sending a job's task, failing it, the sweep of jobs that
  nothing would finish);
- ``background``: the one seam through which services queue Celery tasks (``documents.tasks``
  plugs them in; services never import it);
- ``trees``: the atomic tree swap and the corpus version;
- ``search_index``: the lexical index and the statistics BM25 reads, written with every tree;
- ``collection_indexes``: the per-collection HNSW indexes (made when missing or invalid, dropped);
- ``nodes``: every write to a node (title, summary, an LLM summary, split, merge, move, group,
  dissolve, exclude) and undo, on ``documents.tree_edits`` and ``history``;
- ``history``: a tree edit's session (lock, versions, only what changed) and its record;
- ``reembed``: re-embedding after a model change or a node edit;
- ``agent``: the agent path (an outside agent names the chunks and the tree);
- ``backup``: a collection exported to, and imported from, one JSON Lines file;
- ``backup_format``: that file's format and the checks of each line on import.
"""
