"""A repository's graph view and the indexes derived from it, read by every graph operator.

`build_view` turns a graph kind (governed or raw) into a `GraphView`: the networkx graph with
aggregated edges (`EdgeInfo`), the entity name index the linker reads and the entity name
vectors. Two indexes are derived from a view once per repository version and kept on it (see
`RepoState.ppr_graph` and `RepoState.community_rows`): the entity–passage PPR matrix
(`build_ppr_graph`, walked by ppr.py) and each community's passage rows with their centrality
(`community_passage_centrality`, read by community.py).

These are the records the state pickles into its snapshot, so they sit below state.py and import
nothing else of `pagerag.retrieve`: the state builds them, the operators read them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph.relation_table import RelationTable
from ..records import Community, Entity, Graph
from ..text.names import normalise_name


@dataclass
class EdgeInfo:
    """All relations between one pair of entities, aggregated for the undirected graph."""

    weight: float
    relation_ids: list[str]


@dataclass
class WordBlock:
    """Words with their lengths and a count per letter (columns named by `alphabet`)."""

    words: list[str]
    lengths: np.ndarray
    counts: np.ndarray
    alphabet: dict[str, int]

    @classmethod
    def of(cls, words: list[str]) -> "WordBlock":
        alphabet = {c: i for i, c in enumerate(sorted({c for w in words for c in w}))}
        counts = np.zeros((len(words), len(alphabet)), np.int32)
        for row, word in enumerate(words):
            for char in word:
                counts[row, alphabet[char]] += 1
        return cls(words, np.array([len(w) for w in words], np.int64), counts, alphabet)


@dataclass
class GraphView:
    kind: str
    graph: Graph  # its entities and communities; its relations are in relation_by_id
    nx: Any  # networkx.Graph over entity ids; edge attribute "info" -> EdgeInfo
    entity_row: dict[str, int]
    relation_by_id: RelationTable
    name_index: dict[str, list[tuple[int, str]]]  # normalised name -> [(entity row, "name"|"alias")]
    words_by_initial: dict[str, list[str]]  # first letter -> words of names (fuzzy blocking)
    names_of_word: dict[str, list[str]]  # a word (>= 4 letters) -> normalised names containing it
    specificity: np.ndarray  # per entity: idf of its passages, in [0, 1]
    entity_vectors: np.ndarray
    community_by_id: dict[str, Community] = field(default_factory=dict)
    _community_vectors: np.ndarray | None = None
    _ppr: Any = None  # PPRGraph, built on first use
    _community_rows: Any = None  # per community: (passage rows, centrality), built on first use
    _fuzzy_blocks: dict[str, "WordBlock"] = field(default_factory=dict)

    def fuzzy_block(self, initial: str) -> "WordBlock":
        """The words of names that start with `initial`, with their lengths and letter counts
        (the fuzzy linker's prefilter), built on first use."""
        if initial not in self._fuzzy_blocks:
            self._fuzzy_blocks[initial] = WordBlock.of(self.words_by_initial.get(initial, []))
        return self._fuzzy_blocks[initial]

    def entity(self, entity_id: str) -> Entity:
        return self.graph.entities[self.entity_row[entity_id]]


def build_view(kind: str, graph: Graph, entity_vectors: np.ndarray, n_passages: int, dim: int,
               relations: RelationTable | None = None) -> GraphView:
    """The view of a graph; its relations from `relations` when given (read as columns, no
    records made), else from graph.relations."""
    import networkx as nx

    relations = RelationTable.of(graph.relations) if relations is None else relations
    entity_row = {e.entity_id: i for i, e in enumerate(graph.entities)}
    g = nx.Graph()
    g.add_nodes_from(entity_row)
    g.add_edges_from((s, t, {"info": info}) for (s, t), info in _aggregated_edges(relations, entity_row).items())
    name_index: dict[str, list[tuple[int, str]]] = {}
    for row, entity in enumerate(graph.entities):
        for form, how in [(entity.name, "name"), *((a, "alias") for a in entity.aliases)]:
            norm = normalise_name(form)
            if norm and (row, how) not in name_index.get(norm, []):
                name_index.setdefault(norm, []).append((row, how))
    names_of_word: dict[str, list[str]] = {}
    for norm in name_index:
        for word in dict.fromkeys(norm.split()):  # not a set: its order would change with every process
            if len(word) >= 4:
                names_of_word.setdefault(word, []).append(norm)
    by_initial: dict[str, list[str]] = {}
    for word in names_of_word:
        by_initial.setdefault(word[0], []).append(word)
    if entity_vectors.shape[0] != len(graph.entities):
        entity_vectors = np.zeros((len(graph.entities), dim), np.float32)  # a graph without name vectors
    return GraphView(
        kind=kind, graph=Graph(entities=graph.entities, relations=[], communities=graph.communities),
        nx=g, entity_row=entity_row, relation_by_id=relations,
        name_index=name_index, words_by_initial=by_initial, names_of_word=names_of_word,
        specificity=_specificity(graph.entities, n_passages),
        entity_vectors=entity_vectors,
        community_by_id={c.community_id: c for c in graph.communities},
    )


def _aggregated_edges(relations: RelationTable, entity_row: dict[str, int]) -> dict[tuple[str, str], EdgeInfo]:
    """One EdgeInfo per unordered pair of entities, in the order the pairs are first met: the
    graph then gets each node's neighbours in the order adding the relations one by one gave
    (an undirected graph's adjacency does not keep which way an edge was added). Aggregated in a
    plain dict first: the graph's own lookups per relation were most of building the view
    (0.85 s at 1,000 documents)."""
    edges: dict[tuple[str, str], EdgeInfo] = {}
    for source, target, weight, relation_id in relations.edges():
        if source == target or source not in entity_row or target not in entity_row:
            continue
        key = (source, target) if source < target else (target, source)
        info = edges.get(key)
        if info is None:
            edges[key] = EdgeInfo(float(weight), [relation_id])
        else:
            info.weight += float(weight)
            info.relation_ids.append(relation_id)
    return edges


def _specificity(entities: list[Entity], n_passages: int) -> np.ndarray:
    """idf of each entity's passages scaled to [0, 1]: "man" (everywhere) ~0, a rare name ~1."""
    n = max(n_passages, 2)
    df = np.array([max(len(e.passage_ids), 1) for e in entities], dtype=np.float64)
    return np.clip(np.log(n / df) / math.log(n), 0.0, 1.0) if len(entities) else np.zeros(0)


def edge_strength(weight: float) -> float:
    """A saturating map of co-occurrence/relation weight to (0, 1): 1 -> 0.28, 3 -> 0.63, 10 -> 0.96."""
    return 1.0 - math.exp(-max(weight, 0.0) / 3.0)


@dataclass
class PPRGraph:
    """Column-stochastic transition matrix over [entities..., passages...]."""

    n_entities: int
    n_passages: int
    transition: object  # scipy.sparse.csr_matrix (n x n), column j = where mass at node j goes
    dangling: np.ndarray  # bool per node: no edge (its mass restarts at the seeds)
    passage_entities: object  # scipy.sparse.csr_matrix (n_passages x n_entities), 1 = mentioned
    entity_names: list[str]

    @property
    def size(self) -> int:
        return self.n_entities + self.n_passages


def build_ppr_graph(view, passage_index: dict[str, int], n_passages: int) -> PPRGraph:
    """The entity–passage graph of a GraphView (see ppr.py's module docstring)."""
    import scipy.sparse as sp

    n_ent = len(view.graph.entities)
    entity_rows, passage_rows = entity_passage_pairs(view, passage_index)
    sources, targets, weights = edge_arrays(view)
    strengths = np.array([edge_strength(w) for w in weights.tolist()], np.float64)  # math.exp, as the walk's scores always were
    rows = np.concatenate([entity_rows, sources])
    cols = np.concatenate([n_ent + passage_rows, targets])
    values = np.concatenate([np.ones(len(entity_rows), np.float64), strengths])
    n = n_ent + n_passages
    upper = sp.coo_matrix((values, (rows, cols)), shape=(n, n))
    adjacency = (upper + upper.T).tocsr()
    degree = np.asarray(adjacency.sum(axis=0)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    transition = (adjacency @ sp.diags(inverse)).tocsr()
    incidence = sp.csr_matrix((np.ones(len(passage_rows), np.float32), (passage_rows, entity_rows)),
                              shape=(n_passages, n_ent))
    return PPRGraph(n_ent, n_passages, transition, degree <= 0, incidence,
                    [e.name for e in view.graph.entities])


def entity_passage_pairs(view: GraphView, passage_index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(entity row, passage row) for every passage each entity of the view is in (passages not
    in `passage_index` left out), entity by entity in passage-list order."""
    entity_rows: list[int] = []
    passage_rows: list[int] = []
    for i, entity in enumerate(view.graph.entities):
        found = [j for j in map(passage_index.get, entity.passage_ids) if j is not None]
        passage_rows += found
        entity_rows += [i] * len(found)
    return np.array(entity_rows, np.int64), np.array(passage_rows, np.int64)


def edge_arrays(view: GraphView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The view's edges as (source rows, target rows, summed weights), in the graph's edge order."""
    row = view.entity_row
    triples = [(row[u], row[v], info.weight) for u, v, info in view.nx.edges(data="info")]
    if not triples:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    sources, targets, weights = zip(*triples)
    return np.array(sources, np.int64), np.array(targets, np.int64), np.array(weights, np.float64)


def all_member_degrees(view: GraphView) -> list[dict[str, float]]:
    """member_degrees of every community of the view, in order (the passage centrality and the
    composed vectors both read them), a level at a time where it can (communities.inside_weights)."""
    from ..graph.communities import inside_weights

    communities = view.graph.communities
    found = inside_weights(communities, view.entity_row, *edge_arrays(view))
    return [member_degrees(view, c) if inside is None else {m: 1.0 + w for m, (w, _) in inside.items()}
            for c, inside in zip(communities, found)]


def community_passage_centrality(view: GraphView, passage_index: dict[str, int],
                                 degrees: list[dict[str, float]] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per community: (its passage rows, each row's centrality in [0, 1]) — the summed weighted
    degree, inside the community, of the members the passage mentions. As one sparse product
    (communities × entities by entities × passages): per member and passage in Python it was
    0.36 s of an add's query snapshot at 1,000 documents."""
    import scipy.sparse as sp

    degrees = all_member_degrees(view) if degrees is None else degrees
    n_ent, n_passages = len(view.graph.entities), max(passage_index.values(), default=-1) + 1
    entity_rows, passage_rows = entity_passage_pairs(view, passage_index)
    mentions = sp.csr_matrix((np.ones(len(entity_rows), np.float64), (entity_rows, passage_rows)),
                             shape=(n_ent, n_passages))
    c_rows, c_cols, c_values = [], [], []
    for c, members in enumerate(degrees):
        c_rows += [c] * len(members)
        c_cols += [view.entity_row[m] for m in members]
        c_values += members.values()
    membership = sp.csr_matrix((np.array(c_values, np.float64), (np.array(c_rows, np.int64), np.array(c_cols, np.int64))),
                               shape=(len(degrees), n_ent))
    weight = (membership @ mentions).tocsr()
    weight.sort_indices()
    out = []
    for c in range(len(degrees)):
        start, end = weight.indptr[c], weight.indptr[c + 1]
        rows = weight.indices[start:end].astype(np.int64)
        centrality = weight.data[start:end].astype(np.float64)
        if centrality.size:
            centrality /= centrality.max()
        out.append((rows, centrality))
    return out


def member_degrees(view: GraphView, community: Community) -> dict[str, float]:
    """Each member's weighted degree inside the community, plus one (a member without a relation
    inside still counts)."""
    members = set(community.entity_ids)
    out = {}
    for m in community.entity_ids:
        if m in view.entity_row:
            adjacency = view.nx[m] if m in view.nx else {}
            out[m] = 1.0 + sum(data["info"].weight for other, data in adjacency.items() if other in members)
    return out


COMPOSED_NAMES = 8  # the central members whose name vectors stand for the title and entity list
COMPOSED_PASSAGES = 12  # the central passages whose vectors stand for the summary's sentences


def composed_community_vectors(view: GraphView, rows: list[tuple[np.ndarray, np.ndarray]],
                               passage_vectors: np.ndarray, degrees: list[dict[str, float]] | None = None) -> np.ndarray:
    """Per community, a unit vector of what it is about, made from vectors the repository already
    holds: the mean name vector of its most central members (what its title and entity list
    name) plus the mean vector of its most central passages (where its summary's sentences come
    from), each part of unit length. Embedding each community's title and summary instead cost a
    library's add ~10 s at 1,000 documents (~1,400 summaries re-made per add, docs/library.md);
    evidence recall on the training books' questions was the same either way (and with random
    vectors or none: benchmarks/community_vectors.py)."""
    degrees = all_member_degrees(view) if degrees is None else degrees
    out = np.zeros((len(view.graph.communities), passage_vectors.shape[1]), np.float32)
    for i, members in enumerate(degrees):
        central = sorted(members, key=lambda m: (-members[m], -view.entity(m).mentions, m))[:COMPOSED_NAMES]
        passage_rows, centrality = rows[i]
        top = passage_rows[np.argsort(-centrality, kind="stable")[:COMPOSED_PASSAGES]]
        names = _unit_mean(view.entity_vectors[[view.entity_row[m] for m in central]])
        out[i] = _unit_mean(np.stack([names, _unit_mean(passage_vectors[top])]))
    return out


def _unit_mean(vectors: np.ndarray) -> np.ndarray:
    """The mean of the rows scaled to length one (zeros for no rows or a zero mean)."""
    mean = vectors.astype(np.float64).sum(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean
