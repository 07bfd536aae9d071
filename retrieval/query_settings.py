"""The settings one query runs under, read once and passed to every stage as one value.

``retrieve()`` reads them from Django's settings (``OPENFABLE_RETRIEVAL_*``) unless the caller
passes its own: the benchmark's ablations (``fable_benchmarks.retrieval``) turn a part off by
passing a changed copy (``dataclasses.replace``) instead of overriding global settings. Every
field is part of the query cache's key (``cache.settings_fingerprint``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class QuerySettings:
    top_k: int  # nodes the vector path takes through HNSW
    llmselect_depth: int  # outline depth LLMselect reads
    llm_prompt_tokens: int  # one LLM prompt's outline allowance
    llm_query_tokens: int  # LLM input tokens one query may send, LLMselect and LLMnavigate together
    alpha: float  # TreeExpansion's weights and decay (``expansion.ExpansionWeights``)
    beta: float
    gamma: float
    decay: float
    # The lexical path: its weight in document-level fusion, its share of a node's similarity.
    # Both 0: the path is off (the benchmark's vector-no-lexical).
    lexical_weight: float
    lexical_node_share: float
    # The four switches the benchmark's ablations turn off (see openfable/settings.py for each):
    passage_query: bool  # rank passages by the query without the titles it names
    named_documents: bool  # route a query to the documents it names by title
    name_document_share: float  # damp the query's names in node-level BM25 (0: they weigh fully)
    source_clause: bool  # the words of an opening "According to ...," clause weigh nothing in nodes

    @classmethod
    def from_settings(cls) -> QuerySettings:
        """The configured settings, read now (tests' overrides included)."""
        return cls(
            top_k=settings.RETRIEVAL_TOP_K,
            llmselect_depth=settings.RETRIEVAL_LLMSELECT_DEPTH,
            llm_prompt_tokens=settings.RETRIEVAL_LLM_PROMPT_TOKENS,
            llm_query_tokens=settings.RETRIEVAL_LLM_QUERY_TOKENS,
            alpha=settings.RETRIEVAL_ALPHA,
            beta=settings.RETRIEVAL_BETA,
            gamma=settings.RETRIEVAL_GAMMA,
            decay=settings.RETRIEVAL_DECAY,
            lexical_weight=settings.RETRIEVAL_LEXICAL_WEIGHT,
            lexical_node_share=settings.RETRIEVAL_LEXICAL_NODE_SHARE,
            passage_query=settings.RETRIEVAL_PASSAGE_QUERY,
            named_documents=settings.RETRIEVAL_NAMED_DOCUMENTS,
            name_document_share=settings.RETRIEVAL_NAME_DOCUMENT_SHARE,
            source_clause=settings.RETRIEVAL_SOURCE_CLAUSE,
        )
