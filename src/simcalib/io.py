"""Atomic file output and checked file input.

Every result file is written to a temporary name in the same directory and renamed
into place, so an interrupted job never leaves a half-written file that Snakemake
(or a user) could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
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


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_sha256(obj: Any) -> str:
    """The SHA-256 of ``obj``'s canonical JSON (sorted keys, no spaces): a digest a
    JSON file can carry of its own other keys (floats round-trip exactly)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def check_sha256(path: str | os.PathLike[str], expected: str, actual: str, fix: str) -> None:
    """A :class:`DataError` naming ``path`` when a recorded checksum does not match.

    Why: a trained artefact with one flipped byte (disk, copy, a hand edit) loads
    without error and silently changes every answer computed from it."""
    if expected != actual:
        raise DataError(str(path), f"checksum mismatch (recorded sha256 {expected[:12]}..., "
                        f"file has {actual[:12]}...): the file was changed or damaged after "
                        f"it was written; {fix}")


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str], **kwargs: Any) -> None:
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kwargs)


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def check_csv_shape(path: str | os.PathLike[str], source: str | None = None,
                    cut_tail_ok: bool = False, comments: bool = False) -> None:
    """Every row of the CSV at ``path`` has as many fields as its header, and the header
    names are non-empty and distinct; else a :class:`DataError` naming the file and line.

    Why: pandas reads a table whose rows have one field more than the header with the
    first field as an index (every value shifted one column, silently), pads short rows
    with NaN, and renames a repeated header ``x`` to ``x.1``.  A user's observations
    or data file with one stray comma would then be calibrated to the wrong numbers.
    Blank lines are skipped, as pandas skips them; so are comment lines (first
    non-blank character ``#``) when ``comments``.  ``cut_tail_ok`` leaves a short last
    row with no newline after it (a file cut off mid-write) to the caller, whose own
    check can say more (a chunk names the run that was cut)."""
    src = source or str(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header: list[str] | None = None
            for row in reader:
                if not row or not any(c.strip() for c in row) or (
                        comments and row[0].lstrip().startswith("#")):
                    continue
                if header is None:
                    header = _checked_header(row, reader.line_num, src)
                    continue
                if len(row) != len(header):
                    if cut_tail_ok and len(row) < len(header) and _at_unterminated_end(fh, path):
                        return
                    raise DataError(src, f"line {reader.line_num}: {len(row)} fields, the "
                                    f"header has {len(header)} (a stray or missing "
                                    "separator? the values would be read shifted)")
    except FileNotFoundError:
        raise DataError(src, "file not found") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(src, f"not a readable CSV table ({exc})") from None


def _checked_header(row: list[str], line: int, src: str) -> list[str]:
    """A header row's names, stripped: none empty, none repeated."""
    header = [c.strip() for c in row]
    empty = [i + 1 for i, c in enumerate(header) if not c]
    if empty:
        raise DataError(src, f"line {line}: header column(s) {empty} have no name (an "
                        "index written by to_csv(index=True)? drop that column)")
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise DataError(src, f"line {line}: header column(s) {dup} appear more than once")
    return header


def _at_unterminated_end(fh: Any, path: str | os.PathLike[str]) -> bool:
    """The reader consumed the whole file and its last byte is not a newline."""
    if fh.read(1):
        return False
    with open(path, "rb") as raw:
        raw.seek(0, os.SEEK_END)
        if raw.tell() == 0:
            return False
        raw.seek(-1, os.SEEK_END)
        return raw.read(1) not in (b"\n", b"\r")


def read_csv(path: str | os.PathLike[str], required: Iterable[str] = (),
             strict: bool = True) -> pd.DataFrame:
    """Read a CSV and check that ``required`` columns exist, naming the file and the
    missing columns otherwise.  ``strict`` (default) first checks the table's shape
    (:func:`check_csv_shape`): a ragged row, an unnamed or a repeated header column is
    an error naming the line, never a silently shifted read."""
    if strict:
        check_csv_shape(path)
    try:
        df = pd.read_csv(path, keep_default_na=True, index_col=False)
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
