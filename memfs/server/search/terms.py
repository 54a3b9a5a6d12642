"""The scope of a search as SQL. The words of a query follow ``memfs.contract.search_words`` (one
rule for the server and a mount's local index), re-exported here for the engine.
"""

from __future__ import annotations

import logging
from typing import Any

from memfs.contract.search_words import MAX_TERMS, content_terms, fts5_match, query_terms
from memfs.server.search.document import SearchScope

__all__ = ["MAX_TERMS", "content_terms", "fts5_match", "query_terms", "scope_sql"]

log = logging.getLogger(__name__)


def scope_sql(scope: SearchScope, alias: str) -> tuple[str, list[Any]]:
    """The WHERE condition (and its parameters) selecting ``scope``'s rows of ``search_docs``
    (as ``alias``); the rule is in the package docstring."""
    clauses = [f"{alias}.kind = ?", f"{alias}.store_id = ?"]
    params: list[Any] = [scope.kind, scope.store_id]
    if scope.actor_id is not None:
        clauses.append(f"{alias}.actor_id = ?")
        params.append(scope.actor_id)
    if scope.session_id is not None:
        clauses.append(f"{alias}.session_id = ?")
        params.append(scope.session_id)
    elif scope.session_less:
        clauses.append(f"{alias}.session_id IS NULL")
    if scope.path_prefix:
        clauses.append(f"substr({alias}.path, 1, ?) = ?")
        params += [len(scope.path_prefix), scope.path_prefix]
    return " AND ".join(clauses), params
