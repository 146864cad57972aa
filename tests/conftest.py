"""Shared fixtures: the real default corpus, built once per test session from the pinned PyPI wheels."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_server import openai_server  # noqa: F401 - the shared fixture: a local OpenAI-compatible server
from ray_cluster import ray_cluster  # noqa: F401 - the shared fixture: a real two-node Ray cluster on 127.0.0.1
from ray_hosts import host_installs  # noqa: F401 - the shared fixture: per-host installs for tests/ray_hosts.py

# A test not marked slow fails when it starts a process, opens an MLflow store, loads the model, reaches past
# 127.0.0.1 or writes into the checkout (tests/slow_rule.py).
pytest_plugins = ("slow_rule",)

ROOT = Path(__file__).resolve().parents[1]
# conf/'s answerer/judge cache_path, relative: where a client built from the shipped settings in the checkout writes.
LLM_CACHE = ROOT / "data" / "cache" / "llm.sqlite"

# Tests never reach for a model hub; the embedding model ships inside a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# MLflow would look up its telemetry host from every test that opens a store.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# Loopback test clusters run without token auth (a ~/.ray/auth_token would turn it on): tests/ray_cluster.py.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def real_corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data/docs as the docs stage builds it (wheels cached under data/cache/wheels: downloaded once)."""
    from doceval.config.compose import load_params
    from doceval.inputs.docs import build_corpus, parse_specs

    params = load_params(ROOT / "params.yaml")
    out = tmp_path_factory.mktemp("real") / "docs"
    build_corpus(parse_specs(params.docs.libraries), out, ROOT / "data" / "cache" / "wheels",
                 params.docs.chunk_chars, progress=False)  # fmt: skip
    return out


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> object:
    """The scrubber's registry is per process: one test's secrets must not mask another test's text."""
    from doceval.common.redact import forget_secrets

    yield
    forget_secrets()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_mtime_ns, found.st_size


@pytest.fixture(autouse=True)
def _no_llm_cache_in_the_checkout() -> Iterator[None]:
    """Tests never write into the checkout: a test that builds an LLM client from the shipped settings gives it
    a cache_path under tmp_path (``llm_settings(role, cache_path=...)``) or runs in tmp_path."""
    before = _stat(LLM_CACHE)
    yield
    assert _stat(LLM_CACHE) == before, (
        f"this test wrote {LLM_CACHE}: give its LLM settings a cache_path under tmp_path"
    )
