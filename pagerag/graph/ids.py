"""Deterministic ids for graph elements: readable slugs, never random, never order-dependent hashes."""
from __future__ import annotations

import hashlib
import re
import unicodedata

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """Lower-case ASCII words joined by '-': "Mr. Scrooge's" -> "mr-scrooge-s"."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NON_ALNUM.sub("-", ascii_text.lower()).strip("-") or "x"


def short_hash(text: str, n: int = 6) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def assign_entity_ids(keys: list[tuple[str, str]], mentions: dict[tuple[str, str], int]) -> dict[tuple[str, str], str]:
    """`type:slug` for each (name, type); names that share a slug ("Scrooge", "SCROOGE") keep the
    plain id for the most mentioned one and get a content hash suffix otherwise, so ids depend
    only on the input, never on iteration order."""
    by_base: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        by_base.setdefault(f"{slug(key[1])}:{slug(key[0])}", []).append(key)
    ids: dict[tuple[str, str], str] = {}
    for base, group in by_base.items():
        group.sort(key=lambda k: (-mentions.get(k, 0), k[0]))
        ids[group[0]] = base
        for key in group[1:]:
            ids[key] = f"{base}~{short_hash(key[0])}"
    return ids


def relation_id(kind: str, source: str, target: str, label: str = "") -> str:
    """Co-occurrence ids have no label (one edge per pair); parsed triples keep theirs."""
    return f"{kind}:{source}>{target}" + (f":{slug(label)}" if kind == "svo" else "")
