"""Writes to the corpus, split by what they write. Every surface (web pages, the admin, the REST
API, MCP, the command line) and every task goes through these functions. Only writes live here:
reads are in ``documents.selectors``, and the pure algorithms they use in ``documents.ingestion``,
``documents.tree_edits`` (the tree in memory) and ``documents.review`` (what needs a look).

- ``documents``: collections and documents (create, update, delete, re-index, retry a job);
- ``sharing``: a collection's invitations (invite, accept, decline) and its members;
- ``extracting``: an uploaded file's text, structure and pages, read from the original (a job's
  first stage);
- ``jobs``: ingestion jobs (claim, run now, progress, fail, the sweep of stalled ones);
- ``trees``: the atomic tree swap, the lexical index, the corpus version;
- ``collection_indexes``: the per-collection HNSW indexes (made when missing or invalid, dropped);
- ``nodes``: every write to a node (title, summary, an LLM summary, split, merge, move, group,
  dissolve, exclude) and undo, on ``documents.tree_edits`` and ``history``;
- ``history``: a tree edit's session (lock, versions, only what changed) and its record;
- ``reembed``: re-embedding after a model change or a node edit;
- ``agent``: the agent path (an outside agent names the chunks and the tree);
- ``backup``: a collection exported to, and imported from, one JSON Lines file.
"""

__all__ = [
    "agent",
    "backup",
    "collection_indexes",
    "documents",
    "extracting",
    "history",
    "jobs",
    "nodes",
    "reembed",
    "sharing",
    "trees",
]
