"""Atomic file output and checked file input.

Every result file is written to a temporary name in the same directory and renamed
into place, so an interrupted job never leaves a half-written file that Snakemake
(or a user) could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError

# The checkout that ships ``resources/`` and ``tests/configs`` (for an editable
# install): relative paths not found under the working directory are looked up here,
# so shipped examples also work when Snakemake runs in another directory (``-d``).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def umask() -> int:
    """The process umask, read without changing it where Linux allows (``os.umask``
    sets and restores it, which races with other threads creating files)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success,
    delete it on failure.  The file gets the mode a plain ``open`` would give
    (0666 less the umask, so 0644 under the usual 022): ``mkstemp`` creates 0600,
    which would hide results from colleagues on a shared cluster."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~umask())
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    except json.JSONDecodeError as exc:
        raise DataError(str(path), f"not valid JSON ({exc})") from None


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str], **kwargs: Any) -> None:
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kwargs)


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_csv(path: str | os.PathLike[str], required: Iterable[str] = ()) -> pd.DataFrame:
    """Read a CSV and check that ``required`` columns exist, naming the file and the
    missing columns otherwise."""
    try:
        df = pd.read_csv(path, keep_default_na=True)
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"not a readable CSV table ({exc})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(str(path), f"missing column(s) {missing}; has {list(df.columns)}")
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose simulation succeeded; downstream stages use only these."""
    if "status" not in df.columns:
        return df
    return df[df["status"] == "ok"].reset_index(drop=True)
