"""Ranking in context: a memory is read with its folder and its neighbours in a numbered series.

One rule for the reference server's engine and a mount's local index, applied after a ranker
(BM25, or BM25 fused with embeddings) has scored each memory on its own words. Memories are
rarely self-contained: the answer to "what did Caroline take away from the book?" is a reply,
"It taught me self-acceptance", whose words are all in the memory before it; a folder
(``/session_07/``, ``/projects/garden/``) is about one thing, and a memory in the folder that
holds the best matches is more likely to be the one sought than a stray word match elsewhere.
Passage retrieval has long scored a passage with its document and its neighbours (Callan,
SIGIR 1994; score smoothing over adjacent passages); here the "document" is the folder and the
passages are its memories:

    context(m) = s(m) + FOLDER_WEIGHT * best(folder of m)
                      + sum over d of NEIGHBOUR_WEIGHTS[d - 1] * max(s of the memories d steps
                                                                     away in m's series)

where ``s`` is the ranker's score divided by the answer's best (so 1 is the best match) and
``best(folder)`` the highest ``s`` among the folder's memories. A memory that *asks* (its text
ends with a question mark) lends the memory after it ``REPLY_WEIGHT`` rather than the first
neighbour weight: a question is answered by the next turn, whose words are rarely the
question's ("What position do you play?" then "Shooting guard, and our opener is next week").

A *series* is the memories of one folder whose names differ only in their last number
(``turn_007.md``, ``turn_008.md``; ``2024-05-01.md``, ``2024-05-02.md``), in numeric order: a
conversation, a journal, a log.
Names outside a series (``todo.md``, ``ideas.md``) have no neighbours, so unrelated notes never
lend each other score; they still share their folder's. The answer holds the memories the
ranker scored and the memories of a series next to one (within two steps): a memory is never
returned only for the folder it is in.

Only the folders of the ``CONTEXT_DEPTH`` best memories are read: a folder without a good match
lends nothing worth the reading. The weights were chosen on the development half of LoCoMo
(docs/benchmarks.md, *LoCoMo retrieval*) in coarse steps and checked on the held-back half;
nothing depends on a question's wording.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping

log = logging.getLogger(__name__)

FOLDER_WEIGHT = 0.7
NEIGHBOUR_WEIGHTS = (0.5, 0.25)  # one step away, two steps away
REPLY_WEIGHT = 0.9  # what a memory that asks lends the one after it (its reply)
WHITE_SPACE = " \t\r\n\f\v"  # what may follow a question's mark (the servers' SQL trims the same)
CONTEXT_DEPTH = 50  # the best memories whose folders (and series) are read
# A name in a series: anything, its last run of digits, then no digit (an extension).
_SERIES_NAME = re.compile(r"^(.*?)(\d+)(\D*)$", re.DOTALL)


def folder_of(path: str) -> str:
    """The folder holding ``path``, ending in ``/`` (``/a/b.md`` -> ``/a/``; ``b.md`` -> ``/``)."""
    head, _, _ = path.rpartition("/")
    return head + "/" if head else "/"


def series_of(path: str) -> tuple[str, str, str, int] | None:
    """(folder, name before the number, name after it, number) of a name in a series, or None
    for a name without a number."""
    return _series_in(folder_of(path), path)


def _series_in(folder: str, path: str) -> tuple[str, str, str, int] | None:
    """``series_of(path)`` when ``folder`` is ``folder_of(path)``, already known."""
    match = _SERIES_NAME.match(path[len(folder) :] if path.startswith(folder) else path)
    if match is None:
        return None
    before, digits, after = match.groups()
    return folder, before, after, int(digits)


def asks(text: str) -> bool:
    """Whether ``text`` ends with a question (its last character but ``WHITE_SPACE`` is ``?``)."""
    return text.rstrip(WHITE_SPACE).endswith("?")


def context_folders(scores: Mapping[str, float], paths: Mapping[str, str]) -> set[str]:
    """The folders whose memories ``in_context`` needs: those of the ``CONTEXT_DEPTH`` best of
    ``scores`` (``paths``: the path of each scored memory)."""
    best = sorted(scores, key=lambda doc: (-scores[doc], doc))[:CONTEXT_DEPTH]
    return {folder_of(paths[doc]) for doc in best if doc in paths}


def in_context(
    scores: Mapping[str, float],
    paths: Mapping[str, str],
    members: Iterable[tuple[str, str]],
    questions: Collection[str] = frozenset(),
) -> dict[str, float]:
    """Each memory's score in context (module docstring), for the scored memories and the
    memories of a series one or two steps from a scored one.

    ``scores``: memory id -> the ranker's score (higher is better, at least 0); ``paths``: the
    path of each scored memory; ``members``: (memory id, path) of every memory of the
    ``context_folders`` (more is harmless: memories of other folders are ignored);
    ``questions``: the scored memories that ``asks`` (the others lend replies no more than any
    neighbour)."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return dict(scores)
    own = {doc: score / best for doc, score in scores.items()}
    folders = context_folders(scores, paths)
    # Each memory of those folders: its path and folder (worked out once: a search reads
    # hundreds of members).
    where: dict[str, tuple[str, str]] = {}
    for doc, path in members:
        folder = folder_of(path)
        if folder in folders:
            where[doc] = (path, folder)
    for doc in own:
        if doc in paths and folder_of(paths[doc]) in folders:
            where[doc] = (paths[doc], folder_of(paths[doc]))
    folder_best: dict[str, float] = defaultdict(float)
    series: dict[tuple[str, str, str], list[tuple[int, str]]] = defaultdict(list)
    for doc, (path, folder) in where.items():
        folder_best[folder] = max(folder_best[folder], own.get(doc, 0.0))
        key = _series_in(folder, path)
        if key is not None:
            series[key[:3]].append((key[3], doc))
    # Who is answered: the scored memories, and the memories of a series with a scored
    # neighbour (a reply); a memory that is only in a good folder lends itself no match.
    context = dict(own)
    reach = len(NEIGHBOUR_WEIGHTS)
    for members_in_order in series.values():
        members_in_order.sort()
        ids = [doc for _, doc in members_in_order]
        # only a place within reach of a match gains anything: the others are not looked at
        near_a_match = {
            j
            for i, doc in enumerate(ids)
            if own.get(doc, 0.0) > 0
            for j in range(max(0, i - reach), min(len(ids), i + reach + 1))
        }
        for i in sorted(near_a_match):
            doc = ids[i]
            for step, weight in enumerate(NEIGHBOUR_WEIGHTS, start=1):
                # what each neighbour lends, as a share of the weight one step away: a
                # question lends its reply REPLY_WEIGHT
                lent = [
                    own.get(ids[j], 0.0)
                    * (REPLY_WEIGHT / weight if j == i - 1 and ids[j] in questions else 1.0)
                    for j in (i - step, i + step)
                    if 0 <= j < len(ids)
                ]
                if lent and max(lent) > 0:
                    context[doc] = context.get(doc, 0.0) + weight * max(lent)
    for doc in context:
        if doc in where:
            context[doc] += FOLDER_WEIGHT * folder_best[where[doc][1]]
    return context
