"""The community operator's passage relevance — the mean of each community's few best visible
passage similarities — computed for every community at once, against its definition written as
a loop over communities; and the communities it opens, found from bounds without every
community's relevance, against picking from all of them."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pagerag.retrieve.community import (MIN_ENTITIES, CommunitySegments, community_relevance, pick_communities,
                                        pick_nearest)


def by_definition(rows_of, sizes, sims, k):
    out = []
    for (rows, _), members in zip(rows_of, sizes):
        if members < MIN_ENTITIES or rows.size == 0:
            continue
        best = np.sort(sims[rows])[::-1][: min(k, rows.size)]
        best = best[np.isfinite(best)]
        out.append(best.mean() if best.size else -np.inf)
    return np.array(out)


@pytest.mark.parametrize("seed", range(5))
def test_mean_of_best_is_the_loop_over_communities(seed):
    rng = np.random.default_rng(seed)
    n_passages = 200
    sims = rng.uniform(-0.2, 0.9, n_passages)
    sims[rng.choice(n_passages, 60, replace=False)] = -np.inf  # hidden passages (retrieve(exclude=...))
    sims[:5] = 0.5  # ties
    rows_of, members = [], []
    for _ in range(80):
        size = int(rng.integers(0, 9))  # empty, shorter than k, longer than k
        rows_of.append((np.sort(rng.choice(n_passages, size, replace=False)).astype(np.int64), np.ones(size)))
        members.append(int(rng.integers(1, 5)))
    view = SimpleNamespace(graph=SimpleNamespace(communities=[SimpleNamespace(entity_ids=["e"] * m) for m in members]))
    segments = CommunitySegments.of(view, rows_of)
    assert segments.index.tolist() == [i for i, (r, _) in enumerate(rows_of) if members[i] >= MIN_ENTITIES and r.size]
    for k in (1, 3, 5):
        got, want = segments.mean_of_best(sims, k), by_definition(rows_of, members, sims, k)
        assert np.array_equal(np.isfinite(got), np.isfinite(want))
        assert np.allclose(got[np.isfinite(got)], want[np.isfinite(want)], rtol=0, atol=1e-12)


def test_no_community_that_can_be_opened():
    view = SimpleNamespace(graph=SimpleNamespace(communities=[SimpleNamespace(entity_ids=["a"])]))
    segments = CommunitySegments.of(view, [(np.array([0, 1], np.int64), np.ones(2))])
    assert segments.index.size == 0 and segments.mean_of_best(np.array([0.3, 0.4]), 3).size == 0


@pytest.mark.parametrize("seed", range(6))
def test_the_bounded_pick_opens_the_communities_that_picking_from_all_opens(seed):
    rng = np.random.default_rng(seed)
    n_passages, n_communities = 300, 120
    sims = rng.uniform(-0.2, 0.9, n_passages)
    sims[rng.choice(n_passages, 40, replace=False)] = -np.inf
    sims[10:20] = 0.7  # ties among the best
    communities, rows_of = [], []
    for i in range(n_communities):
        parent = f"c{int(rng.integers(0, i))}" if i and rng.random() < 0.5 else None  # a hierarchy
        communities.append(SimpleNamespace(community_id=f"c{i}", parent=parent,
                                           entity_ids=["e"] * int(rng.integers(1, 6))))
        size = int(rng.integers(0, 12))
        rows_of.append((np.sort(rng.choice(n_passages, size, replace=False)).astype(np.int64), np.ones(size)))
    view = SimpleNamespace(graph=SimpleNamespace(communities=communities))
    segments = CommunitySegments.of(view, rows_of)
    summary_sims = rng.uniform(-0.1, 0.8, n_communities).astype(np.float32)
    for limit in (1, 3, 8, 200):
        want = pick_communities(view, community_relevance(segments, summary_sims, sims), limit)
        for first in (1, 2, 32):
            assert pick_nearest(view, segments, summary_sims, sims, limit, first=first) == want
