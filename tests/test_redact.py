"""The one secret rule (doceval.common.secret_rule) and the one scrubber (doceval.common.redact): which names are
secret, what a registered secret looks like once encoded, and what the environment registers (issue 39, H5-H7).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from doceval.common.redact import (
    REDACTED,
    forget_secrets,
    redact_url,
    register_config,
    register_environment,
    register_overrides,
    register_secret,
    scrub,
    scrub_data,
    scrub_message,
    secret_locations,
    secret_values,
    url_credentials,
)
from doceval.common.secret_rule import forget_secret_names, secret_name

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    forget_secrets()
    forget_secret_names()
    yield
    forget_secrets()
    forget_secret_names()


# Issue 39 H5: every name the two old lists missed, and the listed words in every spelling.
SECRET_NAMES = [
    "hf_token", "refresh_token", "bearer", "api-key", "pwd", "auth", "jwt", "token", "access_token", "hfToken",
    "X-Api-Key", "apiKey", "apikey", "api_key", "private_key", "privateKey", "access_key", "key", "secret",
    "client_secret", "password", "passwd", "pass", "credential", "credentials", "cookie", "Set-Cookie", "sig",
    "signature", "X-Amz-Signature", "Authorization", "retriever.kwargs.hf_token", "agent.kwargs.api-key",
    "retriever.kwargs.credentials.user", "kwargs.list[0].token",
]  # fmt: skip
PUBLIC_NAMES = [
    "max_tokens", "floors.signal", "max_passages", "signal", "sort_key", "cache_key", "primary_key", "monkey",
    "keyword", "tokens", "passages", "k", "author", "design", "signals", "answerer.api_key_env", "MY_TOKEN_ENV",
    "agent.headers_env.X-Api-Token", "agent.headers_env.Authorization", "store.api_key_env",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_one_name_rule_covers_every_listed_word(name: str) -> None:
    assert secret_name(name), name


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_the_rule_matches_whole_segments_and_exempts_env_names(name: str) -> None:
    assert not secret_name(name), name


def _keys(data: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for k, v in data.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            yield key
            yield from _keys(v, key)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _keys(v, f"{prefix}[{i}]")


def test_no_key_of_the_shipped_conf_or_params_yaml_is_secret() -> None:
    """A rule that hid max_passages or floors.signal would drop them from summaries, MLflow and the committed
    params.yaml (and change eval/metrics.json's run)."""
    keys = set(_keys(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))))
    for path in sorted((ROOT / "conf").rglob("*.yaml")):
        group = path.parent.relative_to(ROOT / "conf").as_posix().replace("/", ".")
        keys |= set(_keys(yaml.safe_load(path.read_text(encoding="utf-8")), "" if group == "." else group))
    assert {"answerer.max_passages", "floors.signal", "answerer.max_tokens"} <= keys
    assert sorted(k for k in keys if secret_name(k)) == []


def test_query_names_follow_the_same_rule() -> None:
    """?jwt= was stored raw in summary, journal, MLflow and sqlite: the query rule now is the name rule."""
    url = "https://svc.example/ask?jwt=eyJhbGciOi.secret.sig&hf_token=hf_abcdefgh&page=2&signal=3"
    assert redact_url(url) == "https://svc.example/ask?jwt=***&hf_token=***&page=2&signal=3"
    assert set(url_credentials(url)) == {"eyJhbGciOi.secret.sig", "hf_abcdefgh"}


def test_a_secrets_list_in_the_config_extends_the_rule() -> None:
    value = "sess-0123456789abcdef"
    config = {"secrets": ["session_id"], "retriever": {"kwargs": {"session_id": value, "page_size": 10}}}
    assert not secret_name("retriever.kwargs.session_id")
    register_config(config)
    assert secret_name("retriever.kwargs.session_id") and secret_name("X-Session-Id")
    assert scrub_data(f"the session {value}") == f"the session {REDACTED}"
    assert scrub(config)["retriever"]["kwargs"] == {"page_size": 10}
    assert secret_locations(config) == ["retriever.kwargs.session_id"]


def test_a_secrets_override_is_read_before_the_others() -> None:
    register_overrides(["+retriever.kwargs.tenant=tn-9f8e7d6c5b4a", "+secrets=[tenant]"])
    assert scrub_message("Hydra could not parse tn-9f8e7d6c5b4a") == f"Hydra could not parse {REDACTED}"


TOKEN = "tok/H3ad'er+S3cr\\et=9f8e7d"  # a / (JSON \/ escapes), + and = (quote_plus), ' and \ (repr)
USER, PASSWORD = "alice", "pa55/w0rd+Us3rinfo"


def _b64(text: str) -> list[str]:
    raw = text.encode()
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return [std, std.rstrip("="), url, url.rstrip("=")]


def _forms() -> dict[str, str]:
    forms = {"raw": TOKEN, "quote_plus": urllib.parse.quote_plus(TOKEN), "repr": repr(TOKEN),
             "JSON": json.dumps(TOKEN), "JSON ASCII": json.dumps(TOKEN, ensure_ascii=True),
             "JSON with \\/": json.dumps(TOKEN).replace("/", "\\/"),
             "user:pass": f"{USER}:{PASSWORD}"}  # fmt: skip
    for name, text in (
        ("token", TOKEN),
        ("Bearer token", f"Bearer {TOKEN}"),
        ("user:pass", f"{USER}:{PASSWORD}"),
    ):
        for i, encoded in enumerate(_b64(text)):
            forms[f"base64 {i} of {name}"] = encoded
            forms[f"base64 {i} of {name}, \\/"] = encoded.replace("/", "\\/")
    return forms


def test_every_encoded_form_of_a_registered_secret_is_scrubbed() -> None:
    """H7: an assistant echoing the token as base64 (of itself, of "Bearer <token>", of user:pass), with
    JSON \\/ escapes, quote_plus'd or repr'd, got it into the journal, summary and mlflow.db."""
    register_secret(f"Bearer {TOKEN}")  # a header value, as agent.headers_env sends it
    register_overrides([f"agent.url=http://{USER}:{urllib.parse.quote(PASSWORD, safe='')}@127.0.0.1:9/ask"])
    forms = _forms()
    for name, form in forms.items():
        echoed = {"answer": f"you sent <{form}> ok", "debug": [form]}
        assert form not in json.dumps(scrub_data(echoed)), name
        assert form not in scrub_message(f"error: {form}"), name
    secrets = [PASSWORD, TOKEN]
    assert all(s not in json.dumps(scrub_data(forms)) for s in secrets)


def test_credentials_in_environment_urls_are_registered() -> None:
    """H6: MLflow printed "View run at: http://user:pass@..." from MLFLOW_TRACKING_URI; Ray reads RAY_ADDRESS."""
    register_environment({"MLFLOW_TRACKING_URI": "http://bob:Tr4ck1ngPa55@mlflow.internal:5000",
                          "RAY_ADDRESS": "ray://ray:R4yClust3rKey@head:10001",
                          "HTTPS_PROXY": "http://proxy.local:3128/?token=pr0xyT0ken99", "HOME": "/root",
                          "GIT_REMOTE": "ssh://deployer@git.internal/repo"})  # fmt: skip
    line = "View run x at: http://bob:Tr4ck1ngPa55@mlflow.internal:5000/#/experiments/1"
    printed = scrub_data(line)
    assert "Tr4ck1ngPa55" not in printed and "mlflow.internal:5000/#/experiments/1" in printed
    assert "R4yClust3rKey" not in scrub_data("joined ray://ray:R4yClust3rKey@head:10001")
    assert "pr0xyT0ken99" not in scrub_data("proxy pr0xyT0ken99")
    assert scrub_data("the deployer account") == "the deployer account"  # an ssh user name is no credential
    basic = base64.b64encode(b"bob:Tr4ck1ngPa55").decode()
    assert basic not in scrub_data(f"Authorization: Basic {basic}")


def test_params_refuses_a_config_value_holding_an_encoded_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """`doceval params` refuses any form of a registered secret, whatever key holds it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef")
    encoded = base64.b64encode(b"sk-live-0123456789abcdef").decode()
    register_config({"retriever": {"kwargs": {"blob": encoded, "page_size": 10}}})
    assert secret_locations({"retriever": {"kwargs": {"blob": encoded, "page_size": 10}}}) == [
        "retriever.kwargs.blob"
    ]


def test_a_typed_config_is_refused_not_walked_as_if_it_held_no_keys() -> None:
    """common imports no config (issue 44 M2): the caller passes ``config_dict(cfg)``; a typed object would show
    the walkers no keys, so nothing in it would be registered. Refused loudly instead."""
    from doceval.config.objects import config_dict
    from doceval.config.schema import JudgeNone

    typed = JudgeNone(name="none")
    for call in (register_config, secret_values, secret_locations):
        with pytest.raises(TypeError, match="config_dict"):
            call(typed)
    assert secret_locations(config_dict(typed)) == []
