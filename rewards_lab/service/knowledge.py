"""Knowledge search without a model: BM25 over the service's own documentation.

The corpus is what the package knows about itself: every error code with its type and message, every permission,
and, when the package runs from a checkout, the sections of README.md and docs/*.md. The support assistant
(`service.support_answers`) quotes the best passages with their sources; nothing is generated, so nothing is
invented.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.permissions import Permission

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[a-z0-9_]+")
_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Passage:
    source: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    passage: Passage
    score: float


def _stem(word: str) -> str:
    """A plural's singular, roughly ("schedules", "budgets"): enough for a question to find its section."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _words(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    # Index both a compound code and its parts: `asset_paused` is found by "asset paused" too.
    words += [part for word in words if "_" in word for part in word.split("_") if part]
    return [_stem(word) for word in words]


def _markdown_sections(path: Path, source: str) -> list[Passage]:
    passages: list[Passage] = []
    title, lines = path.stem, list[str]()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            if lines:
                passages.append(Passage(source, title, "\n".join(lines).strip()))
            title, lines = line.lstrip("# ").strip(), []
        else:
            lines.append(line)
    if lines:
        passages.append(Passage(source, title, "\n".join(lines).strip()))
    return [p for p in passages if p.text]


def corpus() -> list[Passage]:
    passages = [
        Passage("error registry", code, f"{code} ({error.type.value}, HTTP {error.http_status}): {error.message}")
        for code, error in sorted(REGISTRY.items())
    ]
    passages += [Passage("permissions", p.value, f"permission {p.value}") for p in Permission]
    for path in [_REPO / "README.md", *sorted((_REPO / "docs").glob("*.md"))]:
        if path.is_file():
            passages += _markdown_sections(path, str(path.relative_to(_REPO)))
    return passages


class Bm25Index:
    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        # A section's title counts twice: it says what the section is about.
        self.terms = [Counter(_words(f"{p.title} {p.title} {p.text}")) for p in passages]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.average = sum(self.lengths) / max(1, len(self.lengths))
        frequency: Counter[str] = Counter()
        for terms in self.terms:
            frequency.update(terms.keys())
        count = len(passages)
        self.idf = {word: math.log(1 + (count - n + 0.5) / (n + 0.5)) for word, n in frequency.items()}

    def search(self, query: str, limit: int) -> list[Hit]:
        words = set(_words(query))
        scored = []
        for index, terms in enumerate(self.terms):
            score = 0.0
            for word in words:
                tf = terms.get(word, 0)
                if tf:
                    norm = K1 * (1 - B + B * self.lengths[index] / self.average)
                    score += self.idf[word] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scored.append(Hit(self.passages[index], round(score, 4)))
        scored.sort(key=lambda hit: (-hit.score, hit.passage.source, hit.passage.title))
        return scored[:limit]


@lru_cache(maxsize=1)
def index() -> Bm25Index:
    return Bm25Index(corpus())


def search(query: str, limit: int = 5) -> list[r.KnowledgeHit]:
    return [resource(hit) for hit in index().search(query, limit)]


def resource(hit: Hit) -> r.KnowledgeHit:
    return r.KnowledgeHit(source=hit.passage.source, title=hit.passage.title, text=hit.passage.text, score=hit.score)
