"""Writes to the corpus, split by what they write. Every surface (web pages, the admin, the REST
API, MCP, the command line) and every task goes through these functions:

- ``documents``: collections and documents (create, update, delete, re-index, retry a job);
- ``trees``: the atomic tree swap, the lexical index, the corpus version;
- ``nodes``: every write to a node (title, summary, an LLM summary, split, merge, move, group,
  dissolve, exclude) and undo, on ``documents.tree_edits`` (the tree in memory, pure) and
  ``history`` (locks, versions, the edit record);
- ``jobs``: ingestion jobs (claim, run now, progress, fail);
- ``reembed``: re-embedding after a model change or a node edit;
- ``agent``: the agent path (an outside agent names the chunks and the tree).
"""
