"""The typed configuration: one dataclass per block of conf/ (and so of params.yaml).

``doceval.config.validate.validate_config`` walks a composed dict against :class:`Config` once, at the edge (the
end of ``compose()`` and ``load_params()``): every key must be declared (a typo or a ``+retriever._target_=x``
is an error, not a silent no-op) and every value must have its declared type and range. Then
``doceval.config.objects.build_config`` makes the frozen :class:`Config` the code reads by attribute; nothing
outside doceval/config reads the raw mapping. Nothing here fills in defaults: those are written once, in conf/.
An openai answerer/judge block also takes the fields of ``doceval.common.llm_settings.LLMConfig`` (see
EXTENDED_BY), held as one ``LLMConfig`` in its ``llm`` field.

Conventions read by the validator:

- a field without a default must be present (every key conf/ writes); a field with the default None is a key
  conf/ leaves out, None meaning "unset" (the component's own behaviour applies, documented where it is read);
- lists are tuples and mappings read-only once built (the config is frozen);
- ``spec(...)`` metadata: ``ge``/``gt``/``le`` bounds, ``choices`` (a tuple, or a function for lists owned by
  other modules), ``keys`` (allowed mapping keys), ``nonempty``, ``pattern``, ``rule`` (why a string is refused,
  or None), ``what`` (a description), ``example`` (the fix shown), ``key`` (the YAML name of a Python keyword),
  ``flat`` (the field holds the EXTENDED_BY keys of its own block; it is no YAML key itself), ``unknown`` (what
  an unknown mapping key's error says instead of listing ``keys``), ``not_with`` (a key that must be unset or 0
  when this one is set; ``why`` says which to keep);
- a union of dataclasses is one block chosen by its first, ``Literal``-typed field (``retriever.name``);
- :data:`OPEN_MAPPINGS` lists the only places where a mapping's keys are free-form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from doceval.common.field_spec import spec
from doceval.common.llm_settings import LLMConfig
from doceval.common.metric_names import METRIC_NAMES, conversation_metric_names, unknown_metric
from doceval.common.paths import pin_part_error

# Dotted paths whose values are free-form mappings handed to user code (an API's own options, extra keyword
# arguments). Keys below them are not checked; elsewhere every key must be declared. A path listed here is
# accepted even if no dataclass declares it, so a new hook (say "retriever.kwargs") is one line.
OPEN_MAPPINGS: frozenset[str] = frozenset(
    {"answerer.response_format", "judge.response_format", "retriever.kwargs", "agent.headers_env", "agent.kwargs",
     "agent.params"}
)  # fmt: skip


def _threshold_names() -> tuple[str, ...]:
    """A threshold may name a conversation figure too (docs/design.md 8.3)."""
    return METRIC_NAMES + conversation_metric_names()


# The calibration objectives by name (docs/design.md 5.3). Declared here, at the edge, so validation needs no
# harness import; doceval.harness.floor_search defines one objective per name and checks the two agree at import.
OBJECTIVE_NAMES = ("max_refusal_at_overrefusal", "min_overrefusal_at_refusal", "decision_accuracy",
                   "hit_rate+refused_correctly", "mrr+refused_correctly", "recall+refused_correctly")  # fmt: skip


# ------------------------------------------------------------------------------------------------ blocks


@dataclass(frozen=True, kw_only=True)
class Library:
    name: str = spec(nonempty=True, rule=pin_part_error, example="pydantic")
    version: str = spec(
        nonempty=True,
        rule=pin_part_error,
        what="a string (quote it: YAML reads 3.0 as a number)",
        example="'2.8.2'",
    )
    sha256: str | None = spec(
        None, pattern=r"[0-9a-f]{64}", what="64 lowercase hex digits (the wheel's sha256)"
    )
    exclude: tuple[str, ...] | None = spec(None, example="['pydantic/v1/*']")


@dataclass(frozen=True, kw_only=True)
class DocsFolder:
    """A folder of markdown/rst docs of one library: one version, or (version null) one subfolder per version."""

    path: str = spec(nonempty=True, example="docs/1.0")
    library: str = spec(nonempty=True, rule=pin_part_error, example="mylib")
    version: str | None = spec(
        None,
        rule=pin_part_error,
        what="a string (quote it: YAML reads 3.0 as a number); null: DIR/<version>/ subfolders",
        example="'1.0'",
    )


@dataclass(frozen=True, kw_only=True)
class Docs:
    chunk_chars: int = spec(ge=1, example="1500")
    # Folders instead of wheels: when any is set, the docs stage builds paths.docs from them (all together).
    folders: tuple[DocsFolder, ...] = spec()
    # the golden set written for this corpus: the default of the top-level `golden` (data/golden/README.md)
    golden_set: str | None = spec(example="data/golden/v1.jsonl")  # null: none (the top-level golden says)
    libraries: tuple[Library, ...] = spec()


@dataclass(frozen=True, kw_only=True)
class AgentDocChat:
    name: Literal["docchat"]  # doceval's own pipeline: the retriever, memory and answerer blocks


@dataclass(frozen=True, kw_only=True)
class AgentFunction:
    name: Literal["function"]
    # Null in conf/ (the option must compose as shipped); doceval.system.external.agents.make_agent refuses null with
    # "agent=function needs agent.target=MODULE:ATTR". Same grammar as doceval.common.targets.TARGET_PATTERN.
    target: str | None = spec(
        pattern=r"[^\W\d]\w*(?:\.[^\W\d]\w*)*:[^\W\d]\w*(?:\.[^\W\d]\w*)*",
        what="MODULE:ATTR (a function on the Python path, the current directory first)",
        example="my_agent:answer",
    )
    kwargs: Mapping[str, Any] = spec(example="{}")  # free-form: the factory's keyword arguments (sweepable)
    timeout_s: float | None = spec(gt=0, example="120")  # null: no deadline
    max_reply_bytes: int = spec(ge=1, example="4194304")


@dataclass(frozen=True, kw_only=True)
class AgentHttp:
    name: Literal["http"]
    url: str | None = spec(  # null in conf/; make_agent refuses it ("agent=http needs agent.url=URL")
        pattern=r"https?://\S+", what="an http:// or https:// URL", example="http://127.0.0.1:8000/ask"
    )
    # Header name -> name of the environment variable whose value is sent (an OPEN_MAPPINGS entry).
    headers_env: Mapping[str, str] = spec(nonempty=True, example="{Authorization: MY_AGENT_TOKEN}")
    # Free-form request parameters sent as the body's "params" object when non-empty (sweepable).
    params: Mapping[str, Any] = spec(example="{}")
    timeout_s: float = spec(gt=0, example="30")  # total per request: connect to last byte
    max_retries: int = spec(ge=0, example="3")
    max_reply_bytes: int = spec(ge=1, example="4194304")
    # Not in conf/: null (unset) leaves doceval.common.retry's own delays.
    retry_base_delay_s: float | None = spec(None, ge=0)
    retry_max_delay_s: float | None = spec(None, ge=0)


@dataclass(frozen=True, kw_only=True)
class RetrieverOverlap:
    name: Literal["overlap"]
    min_score: float = spec(ge=0, example="0.0")


@dataclass(frozen=True, kw_only=True)
class RetrieverBM25:
    name: Literal["bm25"]
    k1: float = spec(ge=0, example="1.5")
    b: float = spec(ge=0, le=1, example="0.75")


@dataclass(frozen=True, kw_only=True)
class RetrieverDense:
    name: Literal["dense"]


@dataclass(frozen=True, kw_only=True)
class RetrieverHybrid:
    name: Literal["hybrid"]
    k1: float = spec(ge=0, example="1.5")  # the lexical half is BM25
    b: float = spec(ge=0, le=1, example="0.75")
    rrf_k: int = spec(ge=0, example="60")
    depth: int = spec(ge=1, example="100")


@dataclass(frozen=True, kw_only=True)
class RetrieverHybridNative:
    name: Literal["hybrid_native"]
    rrf_k: int = spec(ge=1, example="60")  # the engine's RRF divides by rrf_k + rank, rank from 0
    depth: int = spec(ge=1, example="100")


@dataclass(frozen=True, kw_only=True)
class RetrieverFunction:
    name: Literal["function"]
    # Null in conf/ (the option must compose as shipped); building the retriever without one is a UsageError that
    # says to set retriever.target=MODULE:ATTR. Same grammar as doceval.common.targets.TARGET_PATTERN.
    target: str | None = spec(
        pattern=r"[^\W\d]\w*(?:\.[^\W\d]\w*)*:[^\W\d]\w*(?:\.[^\W\d]\w*)*",
        what="MODULE:ATTR (a function on the Python path, the current directory first)",
        example="my_retriever:retrieve",
    )
    kwargs: Mapping[str, Any] = spec(example="{}")  # free-form: the factory's keyword arguments
    timeout_s: float | None = spec(gt=0, example="120")  # null: no deadline


@dataclass(frozen=True, kw_only=True)
class EmbedderMiniLM:
    name: Literal["minilm"]
    batch_size: int = spec(ge=1, example="64")
    precision: str = spec(choices=("fp32", "bf16", "bf16_weights", "auto"), example="bf16")
    device: str = spec(choices=("cpu", "cuda", "auto"), example="auto")


@dataclass(frozen=True, kw_only=True)
class EmbedderOpenAI:
    name: Literal["openai"]
    base_url: str | None = spec(example="http://127.0.0.1:8000/v1")
    model: str = spec(nonempty=True, example="text-embedding-3-small")
    api_key_env: str = spec(nonempty=True, example="OPENAI_API_KEY")
    batch_size: int = spec(ge=1, example="64")
    # Not in conf/: null (unset) leaves doceval.llm.embed_texts' own settings.
    dim: int | None = spec(None, ge=1)
    timeout_s: float | None = spec(None, gt=0)
    max_retries: int | None = spec(None, ge=0)
    retry_base_delay_s: float | None = spec(None, ge=0)
    retry_max_delay_s: float | None = spec(None, ge=0)
    max_concurrency: int | None = spec(None, ge=1)


@dataclass(frozen=True, kw_only=True)
class StoreQdrantLocal:
    name: Literal["qdrant_local"]


@dataclass(frozen=True, kw_only=True)
class StoreSearch:
    exact: bool = spec(example="true")
    hnsw_ef: int | None = spec(ge=1, example="128")
    m: int = spec(ge=0, example="16")
    ef_construct: int = spec(ge=4, example="100")
    quantization: str | None = spec(choices=("scalar", "binary"), example="scalar")
    rescore: bool = spec(example="true")
    oversampling: float | None = spec(ge=1, example="2.0")


@dataclass(frozen=True, kw_only=True)
class StoreQdrantEdge:
    name: Literal["qdrant_edge"]
    search: StoreSearch = spec()


@dataclass(frozen=True, kw_only=True)
class StoreQdrantServer:
    name: Literal["qdrant_server"]
    url: str | None = spec(example="http://127.0.0.1:6333")  # null: $QDRANT_URL
    api_key_env: str = spec(nonempty=True, example="QDRANT_API_KEY")
    timeout_s: int = spec(ge=1, example="30")


@dataclass(frozen=True, kw_only=True)
class AnswererExtractive:
    name: Literal["extractive"]
    max_passages: int = spec(ge=1, example="3")
    # Not in conf/: null (unset) leaves the extractive answerer's own limits.
    sentences: int | None = spec(None, ge=1)
    max_chars: int | None = spec(None, ge=1)
    memory_chars: int | None = spec(None, ge=0)


@dataclass(frozen=True, kw_only=True)
class AnswererOpenAI:
    """Plus every field of ``LLMConfig`` (model, base_url, ..., with its ranges): see EXTENDED_BY."""

    name: Literal["openai"]
    template: str = spec(nonempty=True, example="answer.txt")
    max_passages: int | None = spec(None, ge=1)
    llm: LLMConfig = spec(flat=True)  # the block's other keys (model, base_url, ...), as one client config


@dataclass(frozen=True, kw_only=True)
class JudgeNone:
    name: Literal["none"]


@dataclass(frozen=True, kw_only=True)
class JudgeOpenAI:
    """Plus every field of ``LLMConfig``: see EXTENDED_BY."""

    name: Literal["openai"]
    template: str = spec(nonempty=True, example="judge.txt")
    llm: LLMConfig = spec(flat=True)  # the block's other keys (model, base_url, ...), as one client config


@dataclass(frozen=True, kw_only=True)
class JudgeReference:
    """The offline judge (doceval.scoring.reference_judge): version strings, a key-facts share and a similarity
    threshold."""

    name: Literal["reference"]
    threshold: float = spec(ge=-1, le=1, example="0.6")
    facts_threshold: float = spec(ge=0, le=1, example="0.7")


# Blocks that also take every field of another dataclass, at their own level in YAML, held by their `flat` field.
# LLMConfig declares the client keys and their ranges once, in doceval.common.llm_settings, below both this
# schema and doceval.llm (which never imports doceval.config).
EXTENDED_BY: dict[type, type] = {AnswererOpenAI: LLMConfig, JudgeOpenAI: LLMConfig}


@dataclass(frozen=True, kw_only=True)
class FloorsCalibrated:
    source: Literal["calibrated"]
    path: str = spec(nonempty=True, example="eval/calibration/floors.json")
    global_: float = spec(key="global", example="0.0")  # used for a library the artifact lacks
    per_library: Mapping[str, float] = spec()
    signal: str = spec(choices=("score", "margin", "agreement", "fused"), example="score")


@dataclass(frozen=True, kw_only=True)
class FloorsConfig:
    source: Literal["config"]
    path: str | None = spec(None)
    global_: float = spec(key="global", example="0.3")
    per_library: Mapping[str, float] = spec()
    signal: str = spec(choices=("score", "margin", "agreement", "fused"), example="score")


@dataclass(frozen=True, kw_only=True)
class Split:
    name: str | None = spec(example="test")  # null: every entry


@dataclass(frozen=True, kw_only=True)
class NonRegression:
    enabled: bool = spec(example="true")
    tolerance: float = spec(ge=0, example="0.02")
    metrics: tuple[str, ...] = spec(choices=METRIC_NAMES, example="[hit_rate,mrr]")
    mode: str = spec(choices=("significant", "point"), example="significant")
    alpha: float = spec(gt=0, le=0.5, example="0.05")


@dataclass(frozen=True, kw_only=True)
class Drift:
    enabled: bool = spec(example="true")
    metrics: tuple[str, ...] = spec(choices=METRIC_NAMES, example="[hit_rate]")
    tolerance: float = spec(ge=0, example="0.02")
    window: int = spec(ge=2, example="10")
    reference: str = spec(nonempty=True, example="best")


@dataclass(frozen=True, kw_only=True)
class Gate:
    thresholds: Mapping[str, float] = spec(
        keys=_threshold_names, ge=0, le=1, unknown=lambda: unknown_metric(True)
    )
    max_system_errors: int = spec(ge=0, example="0")  # more entries with a system error: the gate fails
    non_regression: NonRegression = spec()
    drift: Drift = spec()
    for_assistants: Mapping[str, str] = spec(
        keys=METRIC_NAMES,
        choices=METRIC_NAMES,  # design 8.3
        unknown=lambda: unknown_metric(False),
    )


@dataclass(frozen=True, kw_only=True)
class Calibration:
    objective: str = spec(choices=OBJECTIVE_NAMES, example="max_refusal_at_overrefusal")
    max_overrefusal: float = spec(ge=0, le=1, example="0.10")  # max_refusal_at_overrefusal's target
    min_refused_correctly: float = spec(ge=0, le=1, example="0.90")  # min_overrefusal_at_refusal's
    min_entries: int = spec(ge=1, example="5")  # fewer in- or out-of-scope entries: the global floor
    split: str = spec(nonempty=True, example="calibration")
    grid_points: int = spec(ge=2, example="101")


@dataclass(frozen=True, kw_only=True)
class Memory:
    isolate: bool = spec(example="false")
    # How doceval's agent retrieves for a conversation's follow-up (docchat.conversation.REWRITES).
    rewrite: str = spec(choices=("none", "previous"), example="previous")


@dataclass(frozen=True, kw_only=True)
class Paths:
    docs: str = spec(nonempty=True, example="data/docs")
    index: str = spec(nonempty=True, example="data/index")
    runs: str = spec(nonempty=True, example="data/runs")
    cache: str = spec(nonempty=True, example="data/cache")
    eval: str = spec(nonempty=True, example="eval")


@dataclass(frozen=True, kw_only=True)
class Tracking:
    enabled: bool = spec(example="false")
    uri: str | None = spec(example="http://127.0.0.1:5000")
    traces: bool = spec(example="false")  # every entry as an MLflow trace of its run (docs/design.md 6.7)


@dataclass(frozen=True, kw_only=True)
class JudgeValidation:
    """What the `judge` DVC stage measures the offline judge against (design 4.4): ``labels`` (each and together)
    on their ``split``; ``held_out``, files held out as a whole (never calibrated on), on every row."""

    labels: tuple[str, ...] = spec(nonempty=True, example="[data/judge/v1.jsonl]")
    split: str = spec(choices=("calibration", "test", "all"), example="test")
    held_out: tuple[str, ...] = spec(example="[data/judge/v3.jsonl]")


@dataclass(frozen=True, kw_only=True)
class Relevance:
    """Graded judgments (design 3.4): the grade relevant for hit_rate, recall, mrr; nDCG uses the grades."""

    threshold: int = spec(
        choices=(1, 2),
        what="1 or 2, a qrels grade (2: answers the question, 1: partially; grade 0 is never relevant)",
        example="2",
    )


@dataclass(frozen=True, kw_only=True)
class Intervals:
    """How the 95% intervals are made (scoring.intervals): the score interval of the binary metrics."""

    binary: str = spec(choices=("midp", "wilson", "jeffreys"), example="wilson")


@dataclass(frozen=True, kw_only=True)
class Run:
    """The whole run, across roles: the LLM budget (answerer and judge together), the agent's concurrency, and
    how many calls of the user's function may be abandoned past their deadline before the run stops."""

    budget_usd: float | None = spec(ge=0, example="5.0")
    max_concurrency: int = spec(ge=1, example="8")
    max_abandoned: int | None = spec(ge=0, example="3")  # null: no limit


@dataclass(frozen=True, kw_only=True)
class EngineLocal:
    """Everything in this process: threads for calls of a system, the embedder in the driver."""

    name: Literal["local"]


@dataclass(frozen=True, kw_only=True)
class EngineRay:
    """A Ray cluster for the index stage's embedding, evaluation fan-out and sweep points (doceval.engine)."""

    name: Literal["ray"]
    # null: $RAY_ADDRESS, else a Ray started for the run; "local" always starts one; "auto" or an address
    # (HOST:PORT, ray://HOST:PORT) joins an existing cluster.
    address: str | None = spec(example="ray://10.0.0.5:10001")
    actors: int = spec(ge=1, example="2")
    cpus_per_actor: float = spec(ge=0, example="1")
    gpus_per_actor: float = spec(ge=0, example="1")
    batch_size: int = spec(ge=1, example="64")
    max_restarts: int = spec(ge=0, example="3")
    max_task_retries: int = spec(ge=0, example="3")
    num_cpus: int | None = spec(ge=1, example="2")  # a Ray started for the run: its CPUs (null: every core)


Retriever = (
    RetrieverOverlap
    | RetrieverBM25
    | RetrieverDense
    | RetrieverHybrid
    | RetrieverHybridNative
    | RetrieverFunction
)
Embedder = EmbedderMiniLM | EmbedderOpenAI
Store = StoreQdrantEdge | StoreQdrantLocal | StoreQdrantServer
Answerer = AnswererExtractive | AnswererOpenAI
Judge = JudgeNone | JudgeOpenAI | JudgeReference
Floors = FloorsCalibrated | FloorsConfig
Agent = AgentDocChat | AgentFunction | AgentHttp
Engine = EngineLocal | EngineRay


@dataclass(frozen=True, kw_only=True)
class Config:
    """conf/config.yaml composed: the groups first, then the top-level keys (as params.yaml lists them)."""

    docs: Docs
    agent: Agent
    retriever: Retriever
    embedder: Embedder
    store: Store
    answerer: Answerer
    judge: Judge
    floors: Floors
    split: Split
    gate: Gate
    calibration: Calibration
    engine: Engine
    # What runs call the system under test (docs/design.md 8.7): the `system` tag `doceval history --system`
    # filters on, the MLflow run name, compare's and report.md's headers, JUnit's suite. null: derived from it.
    name: str | None = spec(
        pattern=r"[^\s|`]+(?: [^\s|`]+)*", what="a one-line name (no | or `)", example="ravel-assistant"
    )
    k: int = spec(ge=1, example="5")
    candidates_k: int = spec(ge=1, example="100")
    limit: int | None = spec(ge=1, example="50")
    seed: int = spec(ge=0, example="0")  # numpy's default_rng refuses a negative seed
    bootstrap: int = spec(ge=1, example="1000")
    relevance: Relevance
    intervals: Intervals
    memory: Memory
    run: Run
    judge_validation: JudgeValidation
    golden: str = spec(nonempty=True, example="data/golden/v1.jsonl")
    # The conversation set the `conversations` stage replays (null: none, `init` without --conversations); then
    # allow_drafts: score entries marked "draft" (unreviewed) instead of refusing them (docs/design.md 3.5).
    golden_conversations: str | None = spec(nonempty=True, example="data/golden/conversations.jsonl")
    allow_drafts: bool = spec(example="false")
    paths: Paths
    tracking: Tracking
    # More names the secret rule covers (docs/design.md 8.6), e.g. +secrets=[session_id]: a key, kwarg, header
    # or query parameter with one of these names is secret too. Left out of conf/: the rule alone applies.
    secrets: tuple[str, ...] | None = spec(None, nonempty=True, example="['session_id']")
