"""plan(): operators per preset and per what the graph offers, no budget shares, budget, escalation."""
from __future__ import annotations

import pytest

from pagerag.errors import InputError
from pagerag.retrieve.plan import plan, widen
from pagerag.records import Analysis, EntityLink
from pagerag.settings import load_settings


def _analysis(need: str, n_links: int, score: float = 0.9) -> Analysis:
    links = [EntityLink(mention=f"E{i}", start=0, end=2, entity_id=f"e{i}", name=f"E{i}", method="exact", score=score)
             for i in range(n_links)]
    return Analysis(question="q?", links=links, need=need, decided_by="rules", reason="test")


def _settings(preset: str = "full"):
    return load_settings(pipeline=preset, environ={})


def test_every_runnable_operator_runs_whatever_the_need():
    s = _settings()
    assert plan(_analysis("local", 1), s).operators == ["text", "ppr", "neighbour", "community", "rerank"]
    assert plan(_analysis("relational", 2), s).operators == ["text", "ppr", "neighbour", "path", "community", "rerank"]
    assert plan(_analysis("global", 0), s).operators == ["text", "ppr", "community", "rerank"]
    assert plan(_analysis("global", 0), s).need == "global"
    # multi-hop and relational (need_of's names for a complex question) plan alike
    for n_links in (0, 1, 2):
        one, other = plan(_analysis("multi-hop", n_links), s), plan(_analysis("relational", n_links), s)
        assert {**one.__dict__, "need": "", "reasons": []} == {**other.__dict__, "need": "", "reasons": []}


@pytest.mark.parametrize("preset", ["full", "passages-only", "no-floor", "raw-graph", "no-structural-guidance", "ppr"])
def test_no_budget_shares_one_pool(preset):
    p = plan(_analysis("multi-hop", 2), _settings(preset))
    assert not hasattr(p, "shares")
    assert any("one pool" in r for r in p.reasons)


def test_ppr_preset_runs_ppr_alone_in_its_own_order():
    p = plan(_analysis("relational", 2), _settings("ppr"))
    assert [op for op in p.operators if op != "rerank"] == ["ppr"]
    assert any("operator scores" in r for r in p.reasons)


def test_presets_change_the_plan():
    a = _analysis("relational", 2)
    full = plan(a, _settings("full"))
    only = plan(a, _settings("passages-only"))
    nofloor = plan(a, _settings("no-floor"))
    raw = plan(a, _settings("raw-graph"))
    nsg = plan(a, _settings("no-structural-guidance"))
    assert only.operators == ["text", "rerank"] and only.graph == "none"
    assert "text" not in nofloor.operators and {"neighbour", "path"} <= set(nofloor.operators)
    assert raw.graph == "raw" and raw.operators == full.operators
    assert "path" not in nsg.operators and not nsg.structural_guidance
    assert full.graph == "governed" and full.structural_guidance
    assert any("no text floor" in r for r in nofloor.reasons)
    assert "ppr" in full.operators and "ppr" not in only.operators


def test_graph_operators_need_links():
    p = plan(_analysis("relational", 1), _settings())
    assert "path" not in p.operators and any("two linked entities" in r for r in p.reasons)
    weak = plan(_analysis("relational", 2, score=0.1), _settings())
    assert weak.operators == ["text", "ppr", "community", "rerank"]


def test_no_floor_without_links_still_reads_the_graph():
    p = plan(_analysis("local", 0), _settings("no-floor"))
    assert p.operators == ["ppr", "community", "rerank"]


def test_budget_override_and_bad_budgets():
    s = _settings()
    assert plan(_analysis("local", 0), s).budget_tokens == 2000
    assert plan(_analysis("local", 0), s, budget_tokens=300).budget_tokens == 300
    for bad in (0, -5):
        with pytest.raises(InputError, match="positive"):
            plan(_analysis("local", 0), s, budget_tokens=bad)


def test_widen_raises_the_budget():
    s = _settings()
    a = _analysis("local", 2)
    base = plan(a, s)
    wide = widen(base, s, a)
    assert wide.budget_tokens == 3000 and wide.operators == base.operators
    assert any("widened" in r for r in wide.reasons)
