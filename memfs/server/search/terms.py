"""Free text from a user to the words a search looks for, and the scope as SQL.

A query is never parsed as a query language: it is split into Unicode words (``\\w+`` after NFC
normalisation), and each dialect turns those words into its own query where every word is a
literal (FTS5: each one double-quoted, OR-ed; PostgreSQL: lexemes of ``to_tsvector``). Quotes,
``*``, ``-``, ``NEAR(``, ``AND``/``OR``/``NOT`` and parentheses are therefore plain text, and no
input can cause a syntax error.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from memfs.server.search.document import SearchScope

log = logging.getLogger(__name__)

MAX_TERMS = 32  # words beyond these are ignored: a query is a few words
_WORD = re.compile(r"\w+")

# English function words, left out of an FTS5 query when it holds any other word. SQLite's
# tokenizer indexes every word, so "how does she like to be contacted" would otherwise rank by
# "she", "to" and "be"; PostgreSQL's english configuration drops such words itself (measured on
# tests/data/search_eval.json: docs/benchmarks.md, *Search*).
STOP_WORDS = frozenset(  # one string: a word list reads better than 127 quoted lines
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves
    """.split()  # noqa: SIM905
)


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query`` (case-insensitive), in order, at most ``MAX_TERMS``."""
    seen: dict[str, str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFC", query)):
        seen.setdefault(word.casefold(), word)
        if len(seen) == MAX_TERMS:
            break
    return list(seen.values())


def content_terms(terms: list[str]) -> list[str]:
    """``terms`` without ``STOP_WORDS``, unless nothing else is left (a query of "to be" still
    searches for "to" and "be")."""
    kept = [term for term in terms if term.casefold() not in STOP_WORDS]
    return kept or terms


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression finding any of ``terms`` but the stop words (``content_terms``):
    each a quoted string (a ``\\w+`` word holds no ``"``, the one character FTS5 strings must
    escape)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in content_terms(terms))


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
    if scope.path_prefix:
        clauses.append(f"substr({alias}.path, 1, ?) = ?")
        params += [len(scope.path_prefix), scope.path_prefix]
    return " AND ".join(clauses), params
