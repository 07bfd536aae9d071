"""The retrieval paths' database and LLM sides, kept apart from the pure algorithms.

- ``vector``: nearest nodes through the HNSW index (document level) and the exact similarity of
  every node of the selected documents (node level, for TreeExpansion).
- ``llm``: LLMselect and LLMnavigate: bounded outlines, prompts, JSON schemas, answer parsing.

``retrieval.services.retrieve`` wires them to ``expansion``, ``fusion`` and ``packing``.
"""
