"""BM25: ranking a few short documents (tools' names and descriptions) against a query.

Small and exact: the documents of one request, scored whole each time (a request has at
most a few hundred tools).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["rank", "words"]

K1 = 1.2  # how fast a term's repeats stop counting
B = 0.75  # how much a long document is discounted

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def words(text: str) -> list[str]:
    """Lower-case words, split at punctuation, underscores and camelCase humps
    (`get_weather`, `getWeather` -> get, weather)."""
    return [word.lower() for word in _WORD.findall(text)]


def rank(query: str, documents: Sequence[str]) -> list[int]:
    """The indexes of the documents that share a word with `query`, best first."""
    docs = [Counter(words(document)) for document in documents]
    if not docs:
        return []
    average = sum(sum(doc.values()) for doc in docs) / len(docs) or 1.0
    scores: dict[int, float] = {}
    for term in set(words(query)):
        holding = [i for i, doc in enumerate(docs) if term in doc]
        idf = math.log(1 + (len(docs) - len(holding) + 0.5) / (len(holding) + 0.5))
        for i in holding:
            count = docs[i][term]
            length = sum(docs[i].values())
            weight = count * (K1 + 1) / (count + K1 * (1 - B + B * length / average))
            scores[i] = scores.get(i, 0.0) + idf * weight
    return sorted(scores, key=lambda i: (-scores[i], i))
