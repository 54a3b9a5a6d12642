"""The words of a search, one rule for the reference server's engine and a mount's local index.

A query is never parsed as a query language: it is split into Unicode words (``\\w+`` after NFC
normalisation), and each engine turns the words into its own query where every word is a literal
(FTS5: each one double-quoted, OR-ed; PostgreSQL: lexemes of ``to_tsvector``). Quotes, ``*``,
``-``, ``NEAR(``, ``AND``/``OR``/``NOT`` and parentheses are therefore plain text, no input can
cause a syntax error, and a text without a word (blank, punctuation only) finds nothing.

SQLite's FTS5 tokenizer indexes every word, so an FTS5 query leaves out English function words
(``STOP_WORDS``) when it holds any other word: "how does she like to be contacted" would
otherwise rank by "she", "to" and "be" (PostgreSQL's english configuration drops such words
itself; measured on tests/data/search_eval.json in docs/benchmarks.md, *Search*). The list is
PostgreSQL's own (``tsearch_data/english.stop``), so a query counts the same words on both
backends: "don't" is two function words, "would" is none.

``best_line`` picks the line of a memory that a result shows (a mount's ``.search/`` and the
server's MCP tools alike).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

MAX_LINE = 200  # characters of the best line shown (best_line)
MAX_TERMS = 32  # words beyond these are ignored: a query is a few words
_WORD = re.compile(r"\w+")

STOP_WORDS = frozenset(  # one string: a word list reads better than 127 quoted lines
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can did do does doing don down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own s same she should so some such t than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with you your yours yourself yourselves
    """.split()  # noqa: SIM905
)


def words(text: str) -> list[str]:
    """The words of ``text`` (Unicode NFC, case-folded), before any stemming: what a matching
    line is compared by."""
    return _WORD.findall(unicodedata.normalize("NFC", text).casefold())


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query`` (case-insensitive, each as first written), in order, at
    most ``MAX_TERMS``."""
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


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks too) one space."""
    return " ".join(text.split())


def _stem(word: str) -> str:
    """A crude stem, enough to tell which line matched ("tomatoes" for "tomato")."""
    return word[: max(3, len(word) - 2)]


def _matches(term: str, tokens: set[str]) -> bool:
    stem = _stem(term)
    return any(token.startswith(stem) or term.startswith(_stem(token)) for token in tokens)


def best_line(content: str, query: str) -> str:
    """The line of ``content`` holding the most words of ``query`` (the first of equals; the
    first non-blank line if none holds one), on one line, at most ``MAX_LINE`` characters."""
    terms = [term.casefold() for term in content_terms(query_terms(query))]
    best, best_count = "", -1
    for line in content.splitlines():
        if line.strip():
            tokens = set(words(line))
            count = sum(1 for term in terms if _matches(term, tokens))
            if count > best_count:
                best, best_count = line, count
    text = one_line(best)
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def relevance_of(scores: Sequence[float]) -> list[int]:
    """The score people (and models) read, for each of one answer's scores, best first: 100
    for the best, the others their score as a percentage of the best's, rounded, at least 1
    (each matched a word).

    The rankers' own scores compare only within one answer and mean nothing alone: BM25 by the
    server (``7.31``), SQLite FTS5's BM25 of a local index (``9.028e-07`` for a word in most
    memories: its floor), reciprocal rank fusion (at most ``0.033``). No positive score (an
    answer without scores, Databricks' older one): 0 throughout."""
    scored = [score > 0 and math.isfinite(score) for score in scores]
    best = max((score for score, ok in zip(scores, scored, strict=True) if ok), default=0.0)
    return [
        max(1, round(100 * score / best)) if ok else 0
        for score, ok in zip(scores, scored, strict=True)
    ]
