"""Timings live beside results, never inside them.

Why: the same config and seed must give byte-identical result files (so a rerun, a
colleague's run or a CI run can be checked with ``cmp``), but wall-clock seconds
differ on every run.  Writers pass their tables and records through
:func:`write_csv` / :func:`write_json` here: the timing fields go to a side file
``<stem>_timing.csv`` / ``<stem>_timing.json`` next to the result, and readers that
want them back (summaries, the report) use :func:`read_csv` / :func:`read_json`.
Snakemake's own benchmark files (``results/benchmarks/``) record each job's wall
time, CPU time and memory on top.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from simcalib import io
from simcalib.errors import DataError

#: Field names that hold durations (CSV columns, JSON keys at any depth).
TIMING_FIELDS = frozenset({
    "seconds", "sim_seconds", "op_seconds", "mean_seconds", "anchor_seconds",
    "fit_seconds", "fit_cpu_seconds", "train_seconds", "seconds_per_chain",
    "cpu_seconds_per_chain", "solve_seconds", "cpu_seconds", "bounds_seconds",
    "warm_start_seconds", "warm_seconds", "total_seconds",
})

#: Columns copied into a timing CSV so that a person can read it on its own.
_ID_COLUMNS = ("target_id", "strategy", "run_id", "chunk", "method", "setting", "rep",
               "scenario", "step", "case", "parameter", "proximity", "seed", "predictor")


def timing_path(path: str | os.PathLike[str]) -> Path:
    """``results/x/op.csv`` -> ``results/x/op_timing.csv`` (same suffix)."""
    p = Path(path)
    return p.with_name(f"{p.stem}_timing{p.suffix}")


def split_frame(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(the table without timing columns, the timing table or None)."""
    cols = [c for c in df.columns if c in TIMING_FIELDS]
    if not cols:
        return df, None
    ids = [c for c in _ID_COLUMNS if c in df.columns]
    return df.drop(columns=cols), df[ids + cols].reset_index(drop=True)


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Write ``df`` without its timing columns; those go to ``<stem>_timing.csv``."""
    result, timing = split_frame(df)
    io.write_csv(result, path, **kwargs)
    if timing is not None:
        io.write_csv(timing, timing_path(path), index=False)


def read_csv(path: str | os.PathLike[str], required: Iterable[str] = ()) -> pd.DataFrame:
    """A result CSV with its timing columns joined back (row by row) when the side
    file exists and matches; without it the table comes back as written, and a
    required timing column is then an error naming the file."""
    df = io.read_csv(path)
    tp = timing_path(path)
    if tp.is_file():
        timing = io.read_csv(tp)
        cols = [c for c in timing.columns if c in TIMING_FIELDS and c not in df.columns]
        if len(timing) == len(df) and cols:
            df = pd.concat([df.reset_index(drop=True), timing[cols]], axis=1)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(str(path), f"missing column(s) {missing}; has {list(df.columns)}"
                        + ("" if tp.is_file() else f" (and no {tp.name})"))
    return df


def split_obj(obj: Any) -> tuple[Any, Any]:
    """(``obj`` without timing keys, the timing keys with their paths kept) for nested
    dicts and lists of dicts; the timing part is None when there is none."""
    if isinstance(obj, dict):
        keep, timing = {}, {}
        for k, v in obj.items():
            if k in TIMING_FIELDS:
                timing[k] = v
                continue
            kv, tv = split_obj(v)
            keep[k] = kv
            if tv is not None:
                timing[k] = tv
        return keep, (timing or None)
    if isinstance(obj, list):
        parts = [split_obj(v) for v in obj]
        timing = [t for _, t in parts]
        return [k for k, _ in parts], (timing if any(t is not None for t in timing) else None)
    return obj, None


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` without timing keys; those go to ``<stem>_timing.json``."""
    result, timing = split_obj(obj)
    io.write_json(result, path)
    if timing is not None:
        io.write_json(timing, timing_path(path))


def read_json(path: str | os.PathLike[str]) -> Any:
    """A result JSON with its timing keys merged back when the side file exists."""
    obj = io.read_json(path)
    tp = timing_path(path)
    if tp.is_file():
        obj = _merge(obj, io.read_json(tp))
    return obj


def _merge(obj: Any, timing: Any) -> Any:
    if isinstance(obj, dict) and isinstance(timing, dict):
        out = dict(obj)
        for k, v in timing.items():
            out[k] = _merge(out[k], v) if k in out else v
        return out
    if isinstance(obj, list) and isinstance(timing, list) and len(obj) == len(timing):
        return [o if t is None else _merge(o, t) for o, t in zip(obj, timing, strict=True)]
    return obj


def write_torch(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save`` with a fixed archive name, written atomically.

    Why: ``torch.save(obj, file)`` names the zip records after the file's stem, which
    for an atomic write is a random temporary name, so two identical models gave
    different bytes.  Saving to a buffer names the archive ``archive`` always."""
    import io as _io

    import torch

    buf = _io.BytesIO()
    torch.save(obj, buf)
    with io.atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())
