"""retriever=function: the user's own retriever function (or factory) named by retriever.target=MODULE:ATTR, the
retriever registry, and load_target. Every bad input is a UsageError that names the key and the fix."""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import random
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

import doceval.system.retrievers as registry
from doceval.common.targets import (
    distributions_of,
    holding_distribution,
    installed_file,
    load_target,
    provenance_of,
)
from doceval.config import schema
from doceval.config.compose import compose, validate_config
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.system.retrievers import Resources, Retriever, make_retriever, register_retriever
from doceval.system.retrievers.function import FunctionRetriever

CONF = Path(__file__).resolve().parents[1] / "conf"
# conf/retriever/function.yaml as shipped (target null, no kwargs, timeout_s 120); each test sets its own target.
FUNCTION = compose(["retriever=function"], conf_dir=CONF).retriever
assert isinstance(FUNCTION, schema.RetrieverFunction)


@dataclass(frozen=True)
class _Named:
    """A block naming a retriever the schema does not ship (one registered by a plugin, or none at all)."""

    name: str


Write = Callable[[str, str], str]


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """Write ``NAME.py`` into a fresh working directory; sys.path and sys.modules are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_target puts the cwd first; undo it
    written: list[str] = []

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        importlib.invalidate_caches()  # a file written within the same second as the last listing
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _function(target: str | None, **kwargs: Any) -> Retriever:
    return make_retriever(replace(FUNCTION, target=target, kwargs=kwargs), None)


def _usage(target: str | None, needle: str, *, kwargs: Mapping[str, Any] | None = None) -> str:
    with pytest.raises(UsageError) as err:
        retriever = make_retriever(replace(FUNCTION, target=target, kwargs=kwargs or {}), None)
        retriever.retrieve("how do I validate?", "pydantic", "2.8.2", 3)
    message = str(err.value)
    assert needle in message, message
    return message


# ---------------------------------------------------------------------------------------- what it returns


def test_bare_ids_keep_their_order_as_rank_scores_and_collapse_duplicates(user_module: Write) -> None:
    user_module("plain", "def retrieve(question, k):\n    return ['a', 'b', 'a', 'c', 'd']\n")
    retriever = _function("plain:retrieve")
    assert isinstance(retriever, FunctionRetriever)
    assert retriever.name == "function" and retriever.score_range == (-math.inf, math.inf)
    assert retriever.scored is None
    assert retriever.retrieve("q", "pydantic", "2.8.2", 3) == [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    assert retriever.scored is False
    assert retriever.retrieve("q", "pydantic", "2.8.2", 10)[-1] == ("d", 7.0)


def test_scored_pairs_as_lists_or_tuples_and_an_empty_list_is_a_refusal(user_module: Write) -> None:
    user_module(
        "pairs",
        """
        def retrieve(question, k):
            if "nothing" in question:
                return []
            return [("x", 0.9), ["y", 1], ("x", 2.0), ("z", -3.5)]
        """,
    )
    retriever = _function("pairs:retrieve")
    assert isinstance(retriever, FunctionRetriever)
    assert retriever.retrieve("nothing here", "click", "8.1.7", 5) == []
    assert retriever.scored is None  # a refusal says nothing about the form
    # list order is the ranking (not re-sorted); the first occurrence of a duplicate wins
    assert retriever.retrieve("q", "click", "8.1.7", 5) == [("x", 0.9), ("y", 1.0), ("z", -3.5)]
    assert retriever.retrieve("q", "click", "8.1.7", 2) == [("x", 0.9), ("y", 1.0)]
    assert retriever.scored is True


def test_a_factory_with_kwargs_is_called_once(user_module: Write) -> None:
    user_module(
        "factory",
        """
        CALLS = []
        DOCS = [("a", 0.9), ("b", 0.4), ("c", 0.7)]

        def make(min_score, prefix=""):
            CALLS.append((min_score, prefix))

            def retrieve(question, k):
                return [(prefix + d, s) for d, s in DOCS if s >= min_score][:k]

            return retrieve
        """,
    )
    retriever = _function("factory:make", min_score=0.5, prefix="p:")
    assert retriever.retrieve("q1", "lib", "1", 5) == [("p:a", 0.9), ("p:c", 0.7)]
    assert retriever.retrieve("q2", "lib", "1", 1) == [("p:a", 0.9)]
    assert sys.modules["factory"].CALLS == [(0.5, "p:")]


def test_a_factory_may_return_an_object_with_retrieve_and_a_class_is_always_a_factory(
    user_module: Write,
) -> None:
    user_module(
        "ranker",
        """
        class Ranker:
            def __init__(self, top="a"):
                self.top = top

            def retrieve(self, question, k, library=None):
                return [self.top, library]

        def make(top):
            return Ranker(top)
        """,
    )
    assert _function("ranker:make", top="t").retrieve("q", "lib", "1", 5) == [("t", 5.0), ("lib", 4.0)]
    assert _function("ranker:Ranker").retrieve("q", "lib", "1", 5) == [("a", 5.0), ("lib", 4.0)]


def test_library_and_version_are_passed_when_the_function_takes_them(user_module: Write) -> None:
    user_module(
        "pinned",
        """
        def by_name(question, k, *, library, version):
            return [f"{library}@{version}:{question}"]

        def by_kwargs(question, k, **kw):
            return [f"{kw['library']}@{kw['version']}"]

        def library_only(question, k, library):
            return [library]
        """,
    )
    assert _function("pinned:by_name").retrieve("q", "pydantic", "2.8.2", 3) == [("pydantic@2.8.2:q", 3.0)]
    assert _function("pinned:by_kwargs").retrieve("q", "click", "7.1.2", 3) == [("click@7.1.2", 3.0)]
    assert _function("pinned:library_only").retrieve("q", "click", "7.1.2", 3) == [("click", 3.0)]


def test_mixing_scored_and_bare_results_names_the_question(user_module: Write) -> None:
    user_module(
        "mixed",
        """
        def retrieve(question, k):
            return [("a", 1.0)] if question.startswith("first") else ["a"]

        def within(question, k):
            return [("a", 1.0), "b"]
        """,
    )
    retriever = _function("mixed:retrieve")
    retriever.retrieve("first question", "lib", "1", 3)
    with pytest.raises(UsageError) as err:
        retriever.retrieve("second question", "lib", "1", 3)
    message = str(err.value)
    assert "retriever.target=mixed:retrieve" in message and "'second question'" in message
    assert "bare ids" in message and "(id, score) pairs" in message and "one form" in message
    _usage("mixed:within", "mixes bare ids and (id, score) pairs")


def test_an_exception_in_the_users_retriever_keeps_its_type_and_names_the_target(user_module: Write) -> None:
    user_module("flaky", "def retrieve(question, k):\n    raise RuntimeError('backend down')\n")
    with pytest.raises(RuntimeError, match="backend down") as err:
        _function("flaky:retrieve").retrieve("why?", "lib", "1", 3)
    assert any("retriever.target=flaky:retrieve" in note for note in err.value.__notes__)


# -------------------------------------------------------------------------------------------- bad input


def test_no_target_says_how_to_set_one() -> None:
    message = _usage(None, "retriever=function needs retriever.target=MODULE:ATTR")
    assert "retriever.target=my_retriever:retrieve" in message


@pytest.mark.parametrize("target", ["no_colon", "a:b:c", "mod:", ":fn", "1mod:fn", "mod:fn()"])
def test_a_malformed_target_is_refused(target: str) -> None:
    _usage(target, f"retriever.target={target!r}: expected MODULE:ATTR")


def test_a_module_that_is_not_found_names_the_path_searched(user_module: Write) -> None:
    message = _usage(
        "no_such_module:fn", "retriever.target=no_such_module:fn: no module named 'no_such_module'"
    )
    assert os.getcwd() in message and "searched" in message and "PYTHONPATH" in message
    assert sys.path[0] == os.getcwd()  # the working directory is searched first


def test_a_module_that_fails_to_import(user_module: Write) -> None:
    user_module("needs_dep", "import not_installed_anywhere_xyz\n")
    _usage("needs_dep:fn", "importing 'needs_dep' failed: No module named 'not_installed_anywhere_xyz'")
    user_module("broken", "def retrieve(question, k)\n    return []\n")
    _usage("broken:retrieve", "syntax error in 'broken'")
    user_module("raises", "raise ValueError('no config file')\n")
    _usage("raises:fn", "importing 'raises' raised ValueError: no config file")


@pytest.mark.parametrize(
    "source,target,kwargs,needle",
    [
        ("X = 1\n", "mod:retrieve", None, "has no attribute 'retrieve'"),
        ("RETRIEVE = 3\n", "mod:RETRIEVE", None, "names a value of type int, not a function"),
        (
            "def retrieve(question):\n    return []\n",
            "mod:retrieve",
            None,
            "cannot be called as (question, k)",
        ),
        (
            "def retrieve(question, k, index):\n    return []\n",
            "mod:retrieve",
            None,
            "cannot be called as (question, k)",
        ),
        (
            "def retrieve(question, k):\n    return ('a',)\n",
            "mod:retrieve",
            None,
            "returned a value of type tuple",
        ),
        (
            "def retrieve(question, k):\n    return None\n",
            "mod:retrieve",
            None,
            "returned a value of type NoneType",
        ),
        ("def retrieve(question, k):\n    return [3]\n", "mod:retrieve", None, "item 0 is of type int"),
        ("def retrieve(question, k):\n    return [(3, 0.5)]\n", "mod:retrieve", None, "has the id 3 (int)"),
        (
            "def retrieve(question, k):\n    return [('a', 'high')]\n",
            "mod:retrieve",
            None,
            "has the score 'high'; expected a finite number",
        ),
        (
            "def retrieve(question, k):\n    return [('a', True)]\n",
            "mod:retrieve",
            None,
            "has the score True",
        ),
        (
            "def retrieve(question, k):\n    return [('a', float('nan'))]\n",
            "mod:retrieve",
            None,
            "has the score nan",
        ),
        (
            "def retrieve(question, k):\n    return [('a', 1.0, 'x')]\n",
            "mod:retrieve",
            None,
            "item 0 has 3 values; a scored item is a pair (id, score)",
        ),
        (
            "def make(min_score):\n    return lambda question, k: []\n",
            "mod:make",
            {"max_score": 1},
            "does not accept the kwargs max_score",
        ),
        (
            "def make(**kw):\n    raise TypeError('min_score must be a float')\n",
            "mod:make",
            {"min_score": "x"},
            "the factory rejected the kwargs min_score: min_score must be a float",
        ),
        (
            "def make(**kw):\n    raise ValueError('min_score out of range')\n",
            "mod:make",
            {"min_score": 9},
            "kwargs min_score raised ValueError: min_score out of range",
        ),
        (
            "def make(**kw):\n    return 42\n",
            "mod:make",
            {"a": 1},
            "the factory returned a value of type int, which is neither callable nor has a .retrieve",
        ),
    ],
)
def test_bad_user_code_is_a_usage_error_naming_the_target(
    user_module: Write, source: str, target: str, kwargs: dict[str, Any] | None, needle: str
) -> None:
    user_module("mod", source)
    message = _usage(target, needle, kwargs=kwargs)
    assert f"retriever.target={target}" in message


def test_kwargs_must_be_a_mapping(user_module: Write) -> None:
    user_module("mod", "def retrieve(question, k):\n    return []\n")
    with pytest.raises(UsageError, match=r"retriever.kwargs=.*\+retriever.kwargs.NAME=VALUE"):
        make_retriever(replace(FUNCTION, target="mod:retrieve", kwargs=["a"]), None)


# ----------------------------------------------------------------------------- provenance and python API


def test_describe_records_target_kwargs_and_the_code_hash(user_module: Write, tmp_path: Path) -> None:
    user_module("one", "def make(n):\n    return lambda question, k: ['a'] * n\n")
    user_module("two", "def make(n):\n    return lambda question, k: ['b'] * n\n")
    one = _function("one:make", n=1)
    assert isinstance(one, FunctionRetriever)
    described = one.describe()
    assert described["target"] == "one:make" and described["kwargs"] == {"n": 1}
    assert described["source_sha256"] == hashlib.sha256((tmp_path / "one.py").read_bytes()).hexdigest()
    assert described["source_file"] == "one.py" and described["module"] == "one"
    assert "distribution" not in described
    two = _function("two:make", n=1)
    assert isinstance(two, FunctionRetriever)
    assert two.describe()["source_sha256"] != described["source_sha256"]


def test_code_from_an_installed_distribution_records_its_name_and_version() -> None:
    import yaml

    found = provenance_of(yaml.safe_load)
    assert found["distribution"] == "PyYAML" and found["distribution_version"] == yaml.__version__
    assert found["module"] == "yaml" and found["source_sha256"]


def test_provenance_names_the_distribution_that_holds_the_file_not_one_claiming_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43 R2: the installed ir_datasets ships a top-level ``examples``: the repository's own
    examples/askdocs/retrievers.py is still nobody's installed code."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    assert "ir_datasets" in distributions_of("examples")  # the claim this must not trust
    module = importlib.import_module("examples.askdocs.retrievers")
    found = provenance_of(module)
    assert found["source_file"] == "examples/askdocs/retrievers.py" and "distribution" not in found
    assert not installed_file(root / "examples" / "askdocs" / "retrievers.py")


def test_a_stray_egg_info_beside_a_module_does_not_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43 R2: ``mine.egg-info`` left in a source folder claims ``mine``; the file is still not installed."""
    (tmp_path / "mine.py").write_text("def find(question, k):\n    return []\n", encoding="utf-8")
    info = tmp_path / "mine.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: mine\nVersion: 0.1\n", encoding="utf-8")
    (info / "top_level.txt").write_text("mine\n", encoding="utf-8")
    (info / "SOURCES.txt").write_text("mine.py\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    distributions_of.cache_clear()
    try:
        assert distributions_of("mine") == ("mine",)
        found = provenance_of(load_target("mine:find", "retriever.target"))
        assert "distribution" not in found and holding_distribution(tmp_path / "mine.py", "mine") is None
        assert not installed_file(tmp_path / "mine.py")
    finally:
        distributions_of.cache_clear()
    import yaml

    assert installed_file(Path(yaml.__file__)) and installed_file(Path(json.__file__))


def test_distributions_of_one_name_equals_the_full_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """distributions_of(top) reads only what can name ``top`` (issue 26: the full scan was 0.4 s of a 10-entry
    eval) and must still give packages_distributions()'s answer: declared top_level.txt, or names inferred from
    RECORD (dist-info) or SOURCES.txt (egg-info), for installed distributions and for these three. Their listed
    files exist, as an installed package's do: once a library has imported the importlib_metadata backport,
    discovery goes through it, and it skips listed files that are missing."""
    from importlib import metadata

    for listed in ("solo_mod.py", "pkg_inf/__init__.py", "pkg_inf/data.txt", "odd,name/x.py", "egg_mod/core.py",
                   "setup.py"):  # fmt: skip
        (tmp_path / listed).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / listed).write_text("")

    (tmp_path / "inferred-1.0.dist-info").mkdir()
    (tmp_path / "inferred-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: inferred\n")
    (tmp_path / "inferred-1.0.dist-info" / "RECORD").write_text(
        'solo_mod.py,,\npkg_inf/__init__.py,,\npkg_inf/data.txt,,\n"odd,name/x.py",,\n'
    )
    (tmp_path / "declared-2.0.dist-info").mkdir()
    (tmp_path / "declared-2.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: declared\n")
    (tmp_path / "declared-2.0.dist-info" / "top_level.txt").write_text("pkg_dec\npkg_dec\n")
    (tmp_path / "declared-2.0.dist-info" / "RECORD").write_text("solo_mod.py,,\n")  # declared wins
    (tmp_path / "egg.egg-info").mkdir()
    (tmp_path / "egg.egg-info" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: egg\n")
    (tmp_path / "egg.egg-info" / "SOURCES.txt").write_text("egg_mod/core.py\nsetup.py\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    full = metadata.packages_distributions()
    names = sorted(full)
    sample = random.Random(26).sample(names, min(40, len(names)))
    mine = ["solo_mod", "pkg_inf", "pkg_dec", "egg_mod", "setup", "odd,name", "data", "examples", "yaml"]
    for top in [*mine, *sample, "tests", "test", "py", "src", "no_such_module_anywhere"]:
        distributions_of.cache_clear()
        assert distributions_of(top) == tuple(full.get(top, ())), top
    assert distributions_of("pkg_dec") == ("declared", "declared") and distributions_of("egg_mod") == ("egg",)


def test_from_callable_needs_no_module_and_no_corpus() -> None:
    seen: list[tuple[str, int, str]] = []

    def mine(question: str, k: int, library: str) -> list[tuple[str, float]]:
        seen.append((question, k, library))
        return [("a", 0.5), ("b", 0.25)]

    retriever = FunctionRetriever.from_callable(mine, name="notebook", timeout_s=FUNCTION.timeout_s)
    assert retriever.retrieve("q", "lib", "1", 1) == [("a", 0.5)]
    assert seen == [("q", 1, "lib")]
    described = retriever.describe()
    assert described["target"] == "notebook" and described["qualname"].endswith("mine")
    assert described["source_sha256"]
    with pytest.raises(UsageError, match="retriever callable 'lam'.*cannot be called as"):
        FunctionRetriever.from_callable(lambda question: [], name="lam", timeout_s=FUNCTION.timeout_s)


def test_load_target_puts_the_working_directory_first(user_module: Write) -> None:
    user_module("here", "VALUE = {'dotted': 1}\nclass A:\n    class B:\n        x = 7\n")
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    assert load_target("here:VALUE", "agent.target") == {"dotted": 1}
    assert load_target("here:A.B", "agent.target").x == 7
    assert sys.path[0] == os.getcwd()
    with pytest.raises(UsageError, match=r"agent.target=here:A.C: 'here.A' .* has no attribute 'C'"):
        load_target("here:A.C", "agent.target")


# ---------------------------------------------------------------------------------- config and registry


def test_the_config_composes_with_target_and_kwargs_and_builds(user_module: Write) -> None:
    user_module("cfgmod", "def make(min_score):\n    return lambda question, k: [('a', min_score)]\n")
    cfg = compose(
        [
            "retriever=function",
            "retriever.target=cfgmod:make",
            "+retriever.kwargs.min_score=0.5",
        ],
        conf_dir=CONF,
    )
    assert config_dict(cfg.retriever) == {
        "name": "function",
        "target": "cfgmod:make",
        "kwargs": {"min_score": 0.5},
        "timeout_s": 120,
    }
    assert make_retriever(cfg.retriever, None).retrieve("q", "l", "1", 3) == [("a", 0.5)]
    recorded = config_dict(cfg)
    bad = {**recorded, "retriever": {**recorded["retriever"], "target": "cfgmod"}}
    with pytest.raises(UsageError, match=r"retriever.target=cfgmod: expected MODULE:ATTR"):
        validate_config(bad)


def test_builtin_retrievers_still_need_a_corpus() -> None:
    needing = [n for n in registry.RETRIEVERS.names() if registry.RETRIEVERS[n].needs_corpus]
    assert needing and "function" not in needing  # function brings its own documents
    for name in needing:
        with pytest.raises(UsageError, match=f"retriever={name} needs the docs corpus"):
            make_retriever(compose([f"retriever={name}"], conf_dir=CONF).retriever, None)


def test_a_registered_retriever_is_built_without_touching_the_harness() -> None:
    shipped = registry.RETRIEVERS.names()

    class Toy:
        name = "toy"
        score_range = (0.0, 1.0)

        def __init__(self, boost: float) -> None:
            self.boost = boost

        def retrieve(self, question: str, library: str, version: str, k: int) -> list[tuple[str, float]]:
            return [(f"{library}@{version}:toy", self.boost)][:k]

    @dataclass(frozen=True)
    class ToyBlock:  # a plugin's own block: the registry hands it to the builder as it is
        name: str
        boost: float

    @register_retriever("toy", needs_corpus=False)
    def build(cfg: Any, res: Resources) -> Retriever:
        return Toy(float(cfg.boost))

    @register_retriever("toy_corpus")
    def build_corpus(cfg: Any, res: Resources) -> Retriever:
        raise AssertionError("not reached without a corpus")

    try:
        built = make_retriever(ToyBlock(name="toy", boost=0.75), None)  # type: ignore[arg-type]
        assert built.retrieve("q", "lib", "1", 5) == [("lib@1:toy", 0.75)]
        with pytest.raises(UsageError, match="retriever=toy_corpus needs the docs corpus"):
            make_retriever(_Named("toy_corpus"), None)  # type: ignore[arg-type]
        every = ", ".join(sorted((*shipped, "toy", "toy_corpus")))
        with pytest.raises(UsageError, match=f"choose one of: {every}"):
            make_retriever(_Named("splade"), None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="registered twice"):
            register_retriever("toy")(build_corpus)
    finally:
        registry.RETRIEVERS.remove("toy")
        registry.RETRIEVERS.remove("toy_corpus")
    assert registry.RETRIEVERS.names() == shipped
