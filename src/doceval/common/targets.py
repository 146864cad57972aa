"""User code named in the config as ``"MODULE:ATTR"``: import it (current directory first) and say where it came
from, so a run records which code it evaluated (a user retriever, an agent adapter)."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import importlib
import inspect
import json
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from doceval.common.io import sha256_file
from doceval.errors import UsageError

_NAME = r"[^\W\d]\w*"
# MODULE:ATTR, both dotted identifiers: "pkg.mod:factory", "mod:Class.method".
TARGET_PATTERN = rf"{_NAME}(?:\.{_NAME})*:{_NAME}(?:\.{_NAME})*"


def cwd_first_on_path() -> None:
    """Put the current directory first on sys.path, as ``python -m`` does: a console script (`doceval`) starts
    with its bin folder there instead, and ``retriever.target=my_module:fn`` must find ./my_module.py."""
    cwd = os.getcwd()
    if sys.path and sys.path[0] in ("", cwd):
        return
    sys.path.insert(0, cwd)


def load_target(target: str, what: str) -> Any:
    """The object ``target`` (``"MODULE:ATTR"``, ATTR may be dotted) names, imported with the current directory
    first on sys.path. ``what`` is the config key holding it (``retriever.target``), named in every error.

    Raises UsageError (exit 2) for a malformed target, a module that is not found (naming the sys.path
    searched), a module whose import fails (a ``sys.exit()`` in it included: the user's code never chooses
    doceval's exit code), or a missing attribute. A KeyboardInterrupt propagates.
    """
    if not isinstance(target, str) or not re.fullmatch(TARGET_PATTERN, target.strip()):
        raise UsageError(
            f"{what}={target!r}: expected MODULE:ATTR, a module on the Python path and a name in it "
            f"(e.g. {what}=my_retriever:retrieve for retrieve() in ./my_retriever.py)"
        )
    module_name, _, attr = target.strip().partition(":")
    cwd_first_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            searched = ", ".join(p or os.getcwd() for p in sys.path)
            raise UsageError(
                f"{what}={target}: no module named {exc.name!r} on the Python path (searched, in order: "
                f"{searched}); run from the folder holding {module_name.split('.')[0]}.py, "
                f"or add its folder to PYTHONPATH, or pip install it"
            ) from exc
        # The user's module was found, but something it imports was not.
        raise UsageError(
            f"{what}={target}: importing {module_name!r} failed: {exc}; install {exc.name!r} "
            f"in this environment ({sys.executable})"
        ) from exc
    except SyntaxError as exc:
        raise UsageError(
            f"{what}={target}: {exc.filename}:{exc.lineno}: syntax error in {module_name!r}: {exc.msg}"
        ) from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's module raised (or exited) at import: bad input
        raise UsageError(
            f"{what}={target}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    found: Any = module
    for i, part in enumerate(attr.split(".")):
        if not hasattr(found, part):
            owner = module_name + "".join("." + p for p in attr.split(".")[:i])
            where = getattr(module, "__file__", None) or module_name
            raise UsageError(
                f"{what}={target}: {owner!r} ({where}) has no attribute {part!r}; "
                f"name a function or class defined there ({what}=MODULE:ATTR)"
            )
        found = getattr(found, part)
    return found


@lru_cache(maxsize=64)
def distributions_of(top: str) -> tuple[str, ...]:
    """The installed distributions providing top-level module ``top``: exactly
    ``importlib.metadata.packages_distributions().get(top)`` (Python 3.11's rules: a declared top_level.txt,
    else the first part of each .py file in RECORD or SOURCES.txt), in the same order.

    That call parses every distribution's metadata and file list (~0.4 s on a big venv, a quarter of a
    ten-entry ``doceval eval``; issue 26). Here a distribution whose file lists do not even contain the text
    ``top`` is skipped after one read: each name those rules can yield is a substring of one of those files.
    """
    found: list[str] = []
    for dist in metadata.distributions():
        declared = (dist.read_text("top_level.txt") or "").split()
        # A name declared twice is listed twice, as there.
        times = declared.count(top) if declared else int(_infers(dist, top))
        if times:  # parsing the metadata is the slow part: only for the few that match
            found += [dist.metadata["Name"]] * times
    return tuple(found)


def _infers(dist: metadata.Distribution, top: str) -> bool:
    """Whether ``top`` is among the names Python 3.11's ``_top_level_inferred(dist)`` gives: the first part of
    each .py path in ``dist.files``. That list is built only when a row of RECORD (or, without one, the text of
    SOURCES.txt or installed-files.txt) could name ``top``; building it for every distribution was the cost."""
    record = dist.read_text("RECORD")
    if record:
        if top not in record or not any(_names(row, top) for row in csv.reader(record.splitlines())):
            return False
    elif top not in (dist.read_text("SOURCES.txt") or "") + (dist.read_text("installed-files.txt") or ""):
        return False
    # The answer itself comes from Distribution.files, as packages_distributions() gets it (the importlib_metadata
    # backport, once a library has imported it, also drops listed files that are missing on disk).
    files = dist.files or []
    return top in {
        f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name for f in files if f.suffix == ".py"
    }


def _names(row: list[str], top: str) -> bool:
    """Whether one RECORD row is a .py file whose first path part (or module name) is ``top``."""
    if not row or top not in row[0]:
        return False
    path = PurePosixPath(row[0])
    return (
        path.suffix == ".py" and (path.parts[0] if len(path.parts) > 1 else path.with_suffix("").name) == top
    )


def provenance_of(obj: Any) -> dict[str, Any]:
    """Where ``obj``'s code came from: its module, the sha256 of the module's source file and, when that file
    belongs to an installed distribution (:func:`holding_distribution`), that distribution and its version.

    The file hash is kept even for installed code: an editable install changes without a version bump. A
    callable with no source file (defined in a notebook cell) is hashed by its own source text when Python can
    find it; ``source_sha256`` is None only when neither exists.
    """
    module = inspect.getmodule(obj)
    out: dict[str, Any] = {
        "module": module.__name__ if module is not None else getattr(obj, "__module__", None),
        "qualname": getattr(obj, "__qualname__", type(obj).__qualname__),
        "source_file": None,
        "source_sha256": None,
    }
    file = _source_file(module) if module is not None else None
    if file is not None:
        # Relative to the working directory when under it, so the same checkout elsewhere records the same.
        cwd = Path.cwd().resolve()
        out["source_file"] = str(file.relative_to(cwd) if file.is_relative_to(cwd) else file)
        out["source_sha256"] = sha256_file(file)
    else:
        try:
            text = inspect.getsource(obj)
        except (OSError, TypeError):
            text = None
        if text is not None:
            out["source_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    top = str(out["module"] or "").split(".")[0]
    holder = holding_distribution(file, top) if file is not None and top else None
    if holder is not None:
        out["distribution"], out["distribution_version"] = holder.name, holder.version
        if holder.editable:
            out["distribution_editable"] = True
    return out


@dataclass(frozen=True)
class Holder:
    """The installed distribution a source file belongs to: its name, version, and whether it is an editable
    install (the file is the project's own, found through a link the install left in site-packages)."""

    name: str
    version: str | None
    editable: bool


def _site_dirs() -> list[Path]:
    """Where installed distributions live: this interpreter's site-packages folders (and the user's)."""
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # site.getsitepackages is absent in some virtualenvs
        paths |= set(site.getsitepackages())
    paths.add(site.getusersitepackages())
    return [Path(p).resolve() for p in paths if p]


def _in_site(dist: metadata.Distribution) -> bool:
    """The distribution's metadata sits in a site-packages folder (not an egg-info left in a source folder)."""
    where = getattr(dist, "_path", None)
    if where is None:
        return False
    folder = Path(str(where)).resolve().parent
    return any(folder == s or folder.is_relative_to(s) for s in _site_dirs())


def installed_file(file: Path) -> bool:
    """Whether ``file`` is part of this interpreter's installation (its standard library or a site-packages
    folder): every machine with the same environment has its own copy. A source folder's file is not."""
    roots = [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")] + _site_dirs()
    file = file.resolve()
    return any(file.is_relative_to(r) for r in roots)


def holding_distribution(file: Path, top: str) -> Holder | None:
    """The installed distribution that holds ``file``, the source of a module whose top-level name is ``top``:
    one installed in site-packages whose RECORD lists that very file, or an editable install that provides
    ``top`` and whose project folder contains it. Another distribution merely claiming ``top`` (ir_datasets ships a top-level
    ``examples``; a stray ``*.egg-info`` in a source folder) holds nothing."""
    file = file.resolve()
    claiming = dict.fromkeys(distributions_of(top))
    for name in claiming:
        with contextlib.suppress(metadata.PackageNotFoundError):
            dist = metadata.distribution(name)
            if dist.read_text("RECORD") and _in_site(dist):
                files = dist.files or []
                if any(Path(str(dist.locate_file(f))).resolve() == file for f in files if f.suffix == ".py"):
                    return Holder(name, dist.version, False)
    for dist in metadata.distributions():
        folder = _editable_folder(dist)
        # An editable install provides its own top-level packages, not every file of its project folder (a
        # checkout's examples/ beside doceval's src/ is nobody's installed code).
        provides = dist.metadata["Name"] in claiming
        if folder is not None and provides and file.is_relative_to(folder) and _in_site(dist):
            return Holder(dist.metadata["Name"], dist.version, True)
    return None


def _editable_folder(dist: metadata.Distribution) -> Path | None:
    """The project folder of an editable install (PEP 610 direct_url.json), else None."""
    text = dist.read_text("direct_url.json")
    if not text or '"editable"' not in text:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    url = str(data.get("url", ""))
    if not (data.get("dir_info") or {}).get("editable") or not url.startswith("file://"):
        return None
    return Path(unquote(urlparse(url).path)).resolve()


def _source_file(module: Any) -> Path | None:
    try:
        name = inspect.getsourcefile(module)
    except TypeError:  # a built-in module
        return None
    if name is None or not Path(name).is_file():
        return None
    return Path(name).resolve()


def build_from_factory(
    attr: Any, kwargs: dict[str, Any], *, where: str, how: str, method: str, example: str
) -> Callable[..., Any]:
    """The callable a config's ``target`` stands for: ATTR itself, or, with ``kwargs`` (or when ATTR is a
    class), what the factory ``ATTR(**kwargs)`` returns: an object's ``.<method>`` when it has one, else the
    object if it is callable. ``where`` prefixes every UsageError (``retriever.target=mod:fn``), ``how`` names
    the overrides to fix (``+retriever.kwargs.NAME=VALUE``), ``example`` the expected signature."""
    if not callable(attr):
        raise UsageError(
            f"{where}: names a value of type {type(attr).__name__}, not a function; point it at {example}, "
            "or a factory returning one"
        )
    if not kwargs and not inspect.isclass(attr):
        return attr  # type: ignore[no-any-return]
    names = ", ".join(sorted(kwargs)) or "(none)"
    try:
        sig: inspect.Signature | None = inspect.signature(attr)
    except (TypeError, ValueError):  # some built-ins and C callables have none: call and see
        sig = None
    if sig is not None:
        try:
            sig.bind(**kwargs)
        except TypeError as exc:
            raise UsageError(
                f"{where}: the factory{sig} does not accept the kwargs {names}: {exc}; fix or drop the {how} "
                "overrides"
            ) from None
    try:
        made = attr(**kwargs)
    except TypeError as exc:
        raise UsageError(f"{where}: the factory rejected the kwargs {names}: {exc}") from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a ValueError on a bad value, say; a SystemExit never chooses
        # doceval's exit code
        raise UsageError(
            f"{where}: the factory called with kwargs {names} raised {type(exc).__name__}: {exc}"
        ) from exc
    bound = getattr(made, method, None)
    if callable(bound):
        return bound  # type: ignore[no-any-return]
    if callable(made):
        return made  # type: ignore[no-any-return]
    raise UsageError(
        f"{where}: the factory returned a value of type {type(made).__name__}, which is neither callable nor has a "
        f".{method}(...) method; return {example} or an object with that method"
    )
