"""Query analysis without a model: name normalisation, mention spans, exact/alias/fuzzy linking,
specificity, need cues and naming, question validation, graph views and paths over hand-made records."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.errors import InputError
from pagerag.records import Community, Entity, Graph, Relation
from pagerag.retrieve import linking
from pagerag.retrieve.analyse import validate_question
from pagerag.retrieve.need import CUES, cue_features, need_of
from pagerag.retrieve.graph_operators import _describe, edge_strength, paths_between
from pagerag.retrieve.state import build_view
from pagerag.text.names import normalise_name

N_PASSAGES = 100


def _graph() -> Graph:
    def ent(i, name, aliases=(), n=3):
        return Entity(f"e{i}", name, "PERSON", list(aliases), n, [f"p{j}" for j in range(n)])

    entities = [
        ent(0, "Ebenezer Scrooge", ["Scrooge", "Mr. Scrooge"], n=80),
        ent(1, "Bob Cratchit", ["Bob"], n=20),
        ent(2, "Fred", n=6),
        ent(3, "man", n=95),
        ent(4, "Fan", n=2),
        ent(5, "Tiny Tim", n=8),
    ]
    relations = [
        Relation("r0", "e0", "e1", "employs", "svo", 6.0, ["p1"]),
        Relation("r1", "e2", "e0", "nephew of", "svo", 4.0, ["p2"]),
        Relation("r2", "e4", "e2", "cooccurs", "cooccurs", 2.0, ["p3"]),
        Relation("r3", "e1", "e5", "cooccurs", "cooccurs", 5.0, ["p4"]),
        Relation("r4", "e0", "e3", "cooccurs", "cooccurs", 9.0, ["p5"]),
        Relation("r5", "e3", "e5", "cooccurs", "cooccurs", 1.0, ["p6"]),
    ]
    communities = [Community("c0", 0, None, ["e0", "e1"], ["p1"], "Scrooge and Cratchit", "The office.")]
    return Graph(entities, relations, communities)


@pytest.fixture(scope="module")
def view():
    g = _graph()
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(g.entities), 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return build_view("governed", g, vecs, N_PASSAGES, vecs.shape[1])


def test_normalise_name():
    assert normalise_name("Scrooge's") == "scrooge"
    assert normalise_name("The  Keeper of Northern Light!") == "keeper of northern light"
    assert normalise_name("Mr. Scrooge") == "mr scrooge"
    assert normalise_name("Scrooge\u2019s") == "scrooge"


def test_candidate_mentions_are_capitalised_runs():
    q = "How is Tom Piper related to the Keeper of Northern Light?"
    spans = [s.text for s in linking.candidate_mentions(q)]
    assert "Tom Piper" in spans and "Keeper of Northern Light" in spans
    assert "How" not in spans  # a stopword alone is not a mention


def test_exact_alias_and_longest_match(view):
    q = "Why does Mr. Scrooge shout at Bob Cratchit?"
    links, covered = linking.link_exact(q, linking.tokenize(q), view)
    by_name = {l.name: l for l in links}
    assert by_name["Ebenezer Scrooge"].method == "alias" and by_name["Ebenezer Scrooge"].mention == "Mr. Scrooge"
    assert by_name["Bob Cratchit"].method == "exact" and by_name["Bob Cratchit"].mention == "Bob Cratchit"
    assert q[by_name["Bob Cratchit"].start : by_name["Bob Cratchit"].end] == "Bob Cratchit"
    assert "Bob" not in {l.mention for l in links}  # the longer match covers it


def test_possessive_links(view):
    q = "What is Fred's job?"
    links, _ = linking.link_exact(q, linking.tokenize(q), view)
    assert [l.name for l in links] == ["Fred"]


def test_fuzzy_link_for_a_misspelling(view):
    q = "Where does Cratchitt live?"
    tokens = linking.tokenize(q)
    exact, covered = linking.link_exact(q, tokens, view)
    assert not [l for l in exact if l.name == "Bob Cratchit"]
    fuzzy, _ = linking.link_fuzzy(q, tokens, covered, view, threshold=0.75)
    assert any(l.method == "fuzzy" and l.mention == "Cratchitt" for l in fuzzy)


def test_generic_entities_score_below_specific_ones(view):
    q = "Which man met Fan?"
    links, _ = linking.link_exact(q, linking.tokenize(q), view)
    scores = {l.name: l.score for l in links}
    assert scores["Fan"] > scores["man"]
    assert linking.best_links(links, 1)[0].name == "Fan"


def test_embedding_link_uses_the_name_vectors(view):
    q = "Who is Timothy?"
    spans = linking.candidate_mentions(q)
    target = view.entity_row["e5"]
    vecs = view.entity_vectors[[target]]  # a span whose vector equals Tiny Tim's name vector
    links = linking.link_embedding(q, [s for s in spans if s.text == "Timothy"], vecs, view, threshold=0.9)
    assert [l.name for l in links] == ["Tiny Tim"] and links[0].method == "embedding"


@pytest.mark.parametrize("question,cue", [
    ("What are the main themes of the novel?", "global_cue"),
    ("What is the relationship between the miller and the smith?", "relational_cue"),
    ("Who inherited the house of the man who lost the ring?", "nested_cue"),
    ("How many goats did the drover bring?", "fact_cue"),
    ("Imagine you are the miller. Write a letter to the smith.", "creative_cue"),
    ("The smith lost a ring. Who found it?", "sentences"),
])
def test_wording_cues(question, cue):
    values = dict(zip(CUES, cue_features(question)))
    assert values[cue] == 1.0
    assert sum(values[c] for c in CUES if c not in ("log_words",)) <= 2  # a cue fires for its own wording


@pytest.mark.parametrize("question,need", [
    ("The smith lost a ring. Who found it later?", "multi-hop"),
    ("Who inherited the house of the man who lost the ring?", "multi-hop"),
    ("How is the smith connected with the miller?", "relational"),
    ("Where is Mrs. Dilber from?", "relational"),  # "Mrs. D" is not a sentence break
])
def test_a_complex_question_is_named_by_its_wording(question, need):
    assert need_of(question, {"local": 0.2, "complex": 0.5, "global": 0.3})[0] == need
    assert need_of(question, {"local": 0.6, "complex": 0.3, "global": 0.1})[0] == "local"


def test_validate_question():
    assert validate_question("  Who?  ", 100) == "Who?"
    with pytest.raises(InputError, match="empty"):
        validate_question(" \n\t ", 100)
    with pytest.raises(InputError, match="limit is 2,000"):
        validate_question("word " * 20_000, 2000)


def test_view_aggregates_edges_and_specificity(view):
    assert view.nx.number_of_edges() == 6
    assert view.specificity[view.entity_row["e3"]] < 0.1 < view.specificity[view.entity_row["e4"]]


def test_paths_between_prefers_short_strong_paths(view):
    q = np.zeros(8, np.float32)
    paths = paths_between(view, "e4", "e0", max_hops=3, k=3, qvec=q)
    assert paths[0][0] == ["e4", "e2", "e0"]
    three = paths_between(view, "e0", "e5", max_hops=3, k=5, qvec=q)
    nodes = [p for p, _ in three]
    assert ["e0", "e1", "e5"] in nodes and ["e0", "e3", "e5"] in nodes
    # Through the specific Bob Cratchit, not the everywhere-"man"
    assert nodes[0] == ["e0", "e1", "e5"]
    assert paths_between(view, "e4", "e5", max_hops=1, k=3, qvec=q) == []


def test_paths_never_cross_an_edge_only_hidden_passages_state(view):
    q = np.zeros(8, np.float32)
    every = lambda u, v: view.nx[u][v]["info"].relation_ids  # noqa: E731
    hide_nephew = lambda u, v: [] if {u, v} == {"e2", "e0"} else every(u, v)  # noqa: E731
    assert ["e4", "e2", "e0"] in [p for p, _ in paths_between(view, "e4", "e0", 3, 5, q, every)]
    assert all(["e2", "e0"] != p[i:i + 2] and ["e0", "e2"] != p[i:i + 2]
               for p, _ in paths_between(view, "e4", "e0", 3, 5, q, hide_nephew) for i in range(len(p)))


def test_path_description_follows_relation_direction(view):
    every = lambda u, v: view.nx[u][v]["info"].relation_ids  # noqa: E731
    gp = _describe(view, ["e4", "e2", "e0"], 0.5, every)
    assert gp.description == "Fan —[cooccurs]→ Fred —[nephew of]→ Ebenezer Scrooge"
    back = _describe(view, ["e0", "e2"], 0.5, every)
    assert back.description == "Ebenezer Scrooge ←[nephew of]— Fred"


def test_edge_strength_saturates():
    assert 0 < edge_strength(1) < edge_strength(3) < edge_strength(10) < 1


def test_lower_case_words_are_weak_anchors():
    g = Graph([Entity("e0", "Bring", "PERSON", [], 2, ["p1"]), Entity("e1", "sister", "NOUN_PHRASE", [], 2, ["p1"]),
               Entity("e2", "Fan", "PERSON", [], 2, ["p2"])], [], [])
    v = build_view("governed", g, np.eye(3, 8, dtype=np.float32), N_PASSAGES, 8)
    q = "Did Fan bring her sister?"
    scores = {l.name: l.score for l in linking.link_exact(q, linking.tokenize(q), v)[0]}
    assert scores["Fan"] > 2 * scores["Bring"]
    assert scores["Fan"] > scores["sister"] > scores["Bring"]


def test_question_parts_split_statement_and_question():
    from pagerag.retrieve.analyse import question_parts

    q = "Mr. Hobbs locked the grain store at night. What does he tell Ned later?"
    assert question_parts(q) == ["Mr. Hobbs locked the grain store at night.", "What does he tell Ned later?"]
    assert question_parts("What does Mr. Hobbs tell Ned?") == []


_SAME_IN_EVERY_PROCESS = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_retrieve_analyse import _graph
from pagerag.records import Entity, Relation
from pagerag.retrieve.graph_operators import paths_between
from pagerag.retrieve.state import build_view
g = _graph()
# names that share words, and two bridges of equal strength between the same ends
g.entities += [Entity(f"x{i}", name, "PERSON", [], 2, ["p1"]) for i, name in
               enumerate(["Tiny Tim Cratchit", "Martha Cratchit", "Peter Cratchit Tim", "Belinda Cratchit"])]
g.relations += [Relation(f"y{i}", "x0", m, "cooccurs", "cooccurs", 2.0, ["p1"]) for i, m in enumerate(["x1", "x2", "x3"])]
g.relations += [Relation(f"z{i}", m, "e5", "cooccurs", "cooccurs", 2.0, ["p1"]) for i, m in enumerate(["x1", "x2", "x3"])]
v = build_view("governed", g, np.zeros((len(g.entities), 8), np.float32), 100, 8)
q = np.zeros(8, np.float32)
print(json.dumps([v.words_by_initial, v.names_of_word, paths_between(v, "x0", "e5", 3, 10, q)]))
"""


def test_views_and_paths_do_not_depend_on_the_process_hash_seed():
    """Names, fuzzy-link candidates and equal-score paths come out in one order whatever the
    process's string hashing (a set of strings would not)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _SAME_IN_EVERY_PROCESS, str(Path(__file__).parent)],
                              env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
