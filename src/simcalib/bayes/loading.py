"""Finding a user's model module and data file without PYTHONPATH.

A scientist keeps ``mymodel.py`` and ``mydata.csv`` next to their config file (or
in the directory they run from).  ``model: mymodel:setting`` is imported from there;
``model: path/to/file.py:setting`` loads that file; relative data paths resolve the
same way.  Failures name the config key and what was searched.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from simcalib.errors import ConfigError


def search_dirs(extra: Sequence[str] = ()) -> list[str]:
    """Where user model modules and data files are looked for: the given directories
    (the config file's), then the working directory."""
    out = []
    for d in [*extra, os.getcwd()]:
        d = os.path.abspath(d)
        if d not in out:
            out.append(d)
    return out


def resolve_path(path: str, dirs: Sequence[str]) -> str:
    """``path`` as given if absolute or found from the working directory, else the first
    existing one under ``dirs``; unchanged when found nowhere (the reader names it)."""
    if os.path.isabs(path) or os.path.exists(path):
        return os.path.abspath(path)
    for d in dirs:
        cand = os.path.join(d, path)
        if os.path.exists(cand):
            return cand
    return path


def module_dir(spec: str, dirs: Sequence[str]) -> str | None:
    """The directory of ``dirs`` (in the order :func:`load_factory` searches them) that
    holds the module of ``module:function`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``),
    or None when it is none of them (an installed module, or a file path spec)."""
    mod_name = spec.rpartition(":")[0]
    if not mod_name or mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
        return None
    rel = mod_name.replace(".", os.sep)
    for d in dirs:
        if (os.path.exists(os.path.join(d, rel + ".py"))
                or os.path.exists(os.path.join(d, rel, "__init__.py"))):
            return d
    return None


def load_factory(spec: str, key: str, dirs: Sequence[str] = ()) -> Callable[[], Any]:
    """``module:function`` (module found beside the config, in the working directory or
    on the path) or ``path/to/file.py:function``."""
    mod_name, _, fn_name = spec.rpartition(":")
    if not mod_name or not fn_name:
        raise ConfigError(key, f"{spec!r}: expected 'module:function' or 'file.py:function'")
    where = search_dirs(dirs)
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            file = resolve_path(mod_name, where)
            if not os.path.exists(file):
                raise ConfigError(key, f"model file {mod_name!r} not found in {where}")
            uniq = "simcalib_user_" + "".join(c if c.isalnum() else "_" for c in
                                              os.path.abspath(file))
            module = sys.modules.get(uniq)
            if module is None:
                spec_ = importlib.util.spec_from_file_location(uniq, file)
                assert spec_ is not None and spec_.loader is not None
                module = importlib.util.module_from_spec(spec_)
                sys.modules[uniq] = module
                try:
                    spec_.loader.exec_module(module)
                except BaseException:
                    del sys.modules[uniq]
                    raise
        else:
            for d in reversed(where):
                if d not in sys.path:
                    sys.path.insert(0, d)
            module = importlib.import_module(mod_name)
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        raise ConfigError(key, f"cannot import {spec!r}: {exc} (looked in {where} and "
                          "on sys.path)") from None
    except Exception as exc:  # noqa: BLE001 - a user module can raise anything on import
        raise ConfigError(key, f"importing {spec!r} failed: {type(exc).__name__}: {exc}"
                          ) from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ConfigError(key, f"{spec!r}: module has no function {fn_name!r}")
    return fn
