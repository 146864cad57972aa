"""One plug-in rule: every kind of plug-in (retriever, answerer, judge, agent, store, embedder) registers in a
:class:`doceval.common.registry.Registry`, and these tests iterate the registries, never a list of names.

- each registry, the schema's variants and the conf/ options name the same plug-ins;
- registration order is irrelevant: a plug-in registered after the built-ins is found like one of them;
- each registered plug-in, built from its composed block, honours its kind's interface (the retrievers' own
  contract is in tests/test_retrievers.py; how well each one does its job is its own module's tests).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_type_hints

import numpy as np
import pytest
import yaml
from openai_server import FakeOpenAI

from doceval.common.registry import Registry, as_variant
from doceval.config import schema
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.index.embed import EMBEDDERS, judge_encoder
from doceval.index.store import STORES, Backend, VectorStore, check_store_files, register_store, store_subdir
from doceval.scoring.judge import JUDGES, Judge, judge_id, judge_identity, judge_input, make_judge
from doceval.scoring.reference_judge import VersionStrings
from doceval.seam import Probe
from doceval.system.docchat.answerers import ANSWERERS, Answerer, is_offline, make_answerer
from doceval.system.docchat.types import Passage
from doceval.system.external.agents import AGENTS, make_agent
from doceval.system.retrievers import RETRIEVERS

CONF = Path(schema.__file__).parents[1] / "conf"
# Every kind of plug-in: its config key (the schema's Config field, the conf/ group) and its registry.
REGISTRIES: dict[str, Registry[Any]] = {
    "retriever": RETRIEVERS,
    "answerer": ANSWERERS,
    "judge": JUDGES,
    "agent": AGENTS,
    "store": STORES,
    "embedder": EMBEDDERS,
}


def schema_names(key: str) -> set[str]:
    variants = get_args(get_type_hints(schema.Config)[key]) or (get_type_hints(schema.Config)[key],)
    return {get_args(get_type_hints(v)["name"])[0] for v in variants}


def conf_names(key: str) -> set[str]:
    return {yaml.safe_load(p.read_text())["name"] for p in (CONF / key).glob("*.yaml")}


@pytest.mark.parametrize("key", REGISTRIES)
def test_each_registry_names_what_the_schema_and_conf_offer(key: str) -> None:
    registry = REGISTRIES[key]
    assert registry.key == key
    assert set(registry.names()) == schema_names(key) == conf_names(key), key
    with pytest.raises(
        UsageError, match=rf"{key}='nope' is not known; choose one of: {', '.join(registry.names())}"
    ):
        registry.require("nope")


# ------------------------------------------------------------------------------------ the mechanism


def test_names_do_not_depend_on_registration_order() -> None:
    forward: Registry[int] = Registry("thing")
    backward: Registry[int] = Registry("thing")
    for name, value in (("b", 2), ("a", 1), ("c", 3)):
        forward.add(name, value)
    for name, value in (("c", 3), ("a", 1), ("b", 2)):
        backward.add(name, value)
    assert forward.names() == backward.names() == ("a", "b", "c") == tuple(forward)
    assert dict(forward) == dict(backward) == {"a": 1, "b": 2, "c": 3}


def test_a_name_is_registered_once() -> None:
    registry: Registry[int] = Registry("thing")
    registry.add("a", 1)
    registry.add("a", 1)  # the same entry again (a module imported twice) is no change
    with pytest.raises(ValueError, match="thing 'a' is registered twice"):
        registry.add("a", 2)
    with pytest.raises(ValueError, match="non-empty string"):
        registry.add("", 3)
    registry.remove("a")
    assert registry.names() == () and "a" not in registry and registry.get("a") is None


def test_a_builder_given_another_variant_says_which() -> None:
    block = schema.StoreQdrantLocal(name="qdrant_local")
    assert as_variant(block, schema.StoreQdrantLocal, "store") is block
    with pytest.raises(TypeError, match="store=qdrant_local: expected a StoreQdrantEdge block"):
        as_variant(block, schema.StoreQdrantEdge, "store")


def test_a_store_registered_late_is_opened_like_a_built_in(tmp_path: Path) -> None:
    """Order is irrelevant for every registry, not only the retrievers' (tests/test_retrievers.py)."""
    local = STORES["qdrant_local"]

    @register_store("test_late_store", subdir="late", check_files=local.check_files)
    def open_late(cfg: Any, path: Path | None, expect: Any) -> Backend:
        return local.open(schema.StoreQdrantLocal(name="qdrant_local"), path, expect)

    try:
        assert "test_late_store" in STORES.names() and store_subdir("test_late_store") == "late"
        with VectorStore(schema.StoreQdrantLocal(name="qdrant_local"), tmp_path / "q") as s:
            s.recreate("demo@1.0", 2)
        late = VectorStore(_Named("test_late_store"), path=tmp_path / "q", expect={"demo@1.0": 0})  # type: ignore[arg-type]
        assert late.name == "test_late_store" and late.count("demo@1.0") == 0
        late.close()
    finally:
        STORES.remove("test_late_store")


@dataclasses.dataclass(frozen=True)
class _Named:
    name: str


# ------------------------------------------------------------------------ each plug-in's interface


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


def composed(key: str, name: str, server: FakeOpenAI, tmp_path: Path, *overrides: str) -> Any:
    """The shipped block of ``key=name``; a block with an LLM behind it asks the test server, caching under
    ``tmp_path`` (never in the checkout)."""
    block = getattr(compose([f"{key}={name}", *overrides]), key)
    if hasattr(block, "llm"):
        llm = dataclasses.replace(block.llm, base_url=server.base_url, model="test-model",
                                  cache_path=str(tmp_path / "llm.sqlite"), max_retries=0)  # fmt: skip
        block = dataclasses.replace(block, llm=llm)
    return block


PROBE = Probe("p1", "How do I convert a model instance to a dict?", "pydantic", "2.8.2")
PASSAGE = Passage("pydantic@2.8.2:pydantic.BaseModel.model_dump", 0.9, "model_dump()\n\nReturns a dict.")


@pytest.mark.parametrize("name", ANSWERERS.names())
def test_every_answerer_answers_or_refuses_with_a_reason(
    name: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    answerer = make_answerer(composed("answerer", name, server, tmp_path))
    assert isinstance(answerer, Answerer) and answerer.name == name
    assert is_offline(compose([f"answerer={name}"]).answerer) == ANSWERERS[name].offline
    for passages in ([PASSAGE], []):
        answer, refused, reason = answerer.answer(PROBE, passages, [])
        assert isinstance(refused, bool)
        assert (answer is None) == refused, (answer, refused, reason)
        assert isinstance(answer, str) or isinstance(reason, str)
    assert answerer.answer(PROBE, [], [])[1] is True  # nothing to answer from: a refusal, not a guess
    close = getattr(answerer, "close", None)
    if close is not None:
        close()


@pytest.mark.parametrize("name", JUDGES.names())
def test_every_judge_has_an_identity_exactly_when_it_judges(
    name: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    block = composed("judge", name, server, tmp_path)
    judge = make_judge(block, {}, judge_encoder)  # the reference judge's encoder loads MiniLM only when used
    identity = judge_identity(block)
    assert (judge is None) == (identity is None)
    if judge is not None:
        assert isinstance(judge, Judge)
        assert identity == judge_identity(block) and json.loads(json.dumps(identity)) == identity


ENTRY = {"answer": "Call `model_dump()`.", "reference_answer": "Use `model_dump()`.", "library": "pydantic",
         "version": "2.8.2", "question": PROBE.question, "expected_apis": ["model_dump"], "expected_any": [],
         "forbidden_apis": []}  # fmt: skip


@pytest.mark.parametrize("name", JUDGES.names())
def test_what_each_judge_was_sent_is_rebuilt_from_the_summary(
    name: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    block = composed("judge", name, server, tmp_path)
    sent = judge_input({"judge": config_dict(block), "judge_id": judge_id(block)}, ENTRY)
    assert sent["answer"] == ENTRY["answer"] and sent["reference"] == ENTRY["reference_answer"]
    if name == "openai":  # its own case: the rendered prompt
        assert ENTRY["reference_answer"] in "\n".join(m["content"] for m in sent["messages"])
    if name == "reference":  # its own case: the rule and the entry's version strings
        assert sent["rule"] and sent["version_strings"]["expected_apis"] == ["model_dump"]
    unknown = judge_input({"judge": {"name": "gone"}, "judge_id": None}, ENTRY)
    assert unknown == {"answer": ENTRY["answer"], "reference": ENTRY["reference_answer"]}


@pytest.mark.slow  # the reference judge embeds with the real MiniLM
@pytest.mark.parametrize("name", JUDGES.names())
def test_every_judge_returns_a_verdict_or_an_error(name: str, server: FakeOpenAI, tmp_path: Path) -> None:
    labels = {PROBE.id: VersionStrings(expected=("model_dump",))}
    judge = make_judge(composed("judge", name, server, tmp_path), labels, judge_encoder)
    if judge is None:
        return  # judge=none: nothing is judged (the test above holds it to having no identity)
    for answer in ("Call `model_dump()` on it.", "Use `.dict()`."):
        verdict, reason, error = judge.judge(PROBE, answer, "Call `model_dump()` on it.")
        assert (verdict is None) == (error is not None), (verdict, reason, error)
        assert verdict is None or isinstance(verdict, bool)


# Settings an agent cannot be built without (its conf/ block leaves them to the user).
REQUIRED_AGENT_SETTINGS = {
    "function": ["agent.target=test_plugins:contract_agent"],
    "http": ["agent.url=http://127.0.0.1:9/ask"],
}


def contract_agent(question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
    return {"answer": None, "sources": [], "refused": True, "reason": "contract"}


@pytest.mark.parametrize("name", AGENTS.names())
def test_every_agent_is_doceval_s_own_or_describes_itself(
    name: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    agent = make_agent(composed("agent", name, server, tmp_path, *REQUIRED_AGENT_SETTINGS.get(name, [])))
    if agent is None:
        return  # doceval's own agent answers (agent=docchat)
    assert agent.name == name and agent.sampling is None
    described = agent.describe()
    assert isinstance(described, dict) and json.loads(json.dumps(described)) == described


EMBEDDED = [n for n in STORES.names() if store_subdir(n) is not None]  # a server store needs its server


@pytest.mark.parametrize("name", EMBEDDED)
def test_every_embedded_store_keeps_its_partitions_apart(name: str, tmp_path: Path) -> None:
    block = compose([f"store={name}"]).store
    folder = tmp_path / str(store_subdir(name))
    vectors = np.eye(3, dtype=np.float32)
    with VectorStore(block, path=folder) as store:
        for pin in ("demo@1.0", "demo@2.0"):
            store.recreate(pin, 3)
            store.upsert(pin, [f"{pin}:d{i}#0" for i in range(3)], [f"{pin}:d{i}" for i in range(3)], vectors,
                         texts=["a", "b", "c"])  # fmt: skip
            assert store.finish(pin) == 3 and store.has(pin) and store.count(pin) == 3
        hits = store.search("demo@2.0", vectors[1], 2, exact=True)
    assert len(hits) <= 2 and hits[0][:2] == ("demo@2.0:d1#0", "demo@2.0:d1")
    assert all(doc.startswith("demo@2.0:") for _, doc, _ in hits)
    assert [s for *_, s in hits] == sorted((s for *_, s in hits), reverse=True)
    check_store_files(name, folder, {"demo@1.0": 3, "demo@2.0": 3})
    with pytest.raises(UsageError):
        check_store_files(name, folder, {"demo@1.0": 4})


@pytest.mark.slow  # minilm loads the real model
@pytest.mark.parametrize("name", EMBEDDERS.names())
def test_every_embedder_gives_one_finite_vector_per_text(
    name: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = compose([f"embedder={name}"]).embedder
    if hasattr(block, "base_url"):  # an endpoint: the test server, with a key where the block reads one
        block = dataclasses.replace(block, base_url=server.base_url)
        monkeypatch.setenv(block.api_key_env, "test-key")
    embedder = EMBEDDERS[name](block)
    texts = ["model_dump returns a dict", "validators run before the model", "model_dump returns a dict"]
    vectors = embedder.encode(texts)
    assert vectors.shape == (3, embedder.dim) and embedder.dim > 0 and np.isfinite(vectors).all()
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    assert isinstance(embedder.fingerprint, str) and embedder.fingerprint
