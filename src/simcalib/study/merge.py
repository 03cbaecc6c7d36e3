"""Merging simulated chunks into the dataset, checking each chunk first.

A chunk file can be wrong without being unreadable: cut at a row boundary (fewer
rows), cut mid-value (a last row with an empty or partial status), emptied (0
bytes), or edited by hand.  Merging such a file would silently train the metamodel
on fewer or wrong rows, so every chunk is checked against the design (run ids, row
count, input values, columns) and against the summary its own job wrote (row count,
status counts, sha256 of the file).  Any mismatch is a :class:`DataError` naming the
chunk file, what is wrong, and how to redo that chunk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.io import check_csv_shape
from simcalib.simulators.base import STATUSES

TAIL = ("status", "message")


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _redo(path: str | Path) -> str:
    p = Path(path)
    return (f"; rerunning this chunk fixes it: remove {p} and {p.with_suffix('.json')} "
            "and run the workflow again")


def read_chunk(path: str | Path) -> pd.DataFrame:
    p = Path(path)
    try:
        if p.stat().st_size == 0:
            raise DataError(str(p), "chunk file is empty (0 bytes): its job was cut off or the "
                            "file was damaged" + _redo(p))
        try:
            check_csv_shape(p, cut_tail_ok=True)
        except DataError as exc:
            raise DataError(str(p), exc.message + _redo(p)) from None
        return pd.read_csv(p, keep_default_na=False, na_values=["", "nan", "NaN"],
                           index_col=False)
    except FileNotFoundError:
        raise DataError(str(p), "chunk file not found" + _redo(p)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(str(p), f"chunk is not a readable CSV table ({exc})" + _redo(p)) from None


def check_chunk(df: pd.DataFrame, path: str | Path, expected: pd.DataFrame,
                meta: Mapping[str, Any] | None = None) -> None:
    """Check one chunk against its slice of the design (``expected``: run_id + inputs)
    and, when given, the summary its job wrote."""
    p = str(path)

    def bad(what: str) -> DataError:
        return DataError(p, what + _redo(p))

    cols = list(df.columns)
    lead = list(expected.columns)
    if meta is not None and "columns" in meta and cols != list(meta["columns"]):
        raise bad(f"columns {cols} differ from those its job wrote {list(meta['columns'])}")
    if cols[:len(lead)] != lead or cols[-2:] != list(TAIL) or len(cols) < len(lead) + 2:
        raise bad(f"columns {cols} are not the design's {lead}, then outputs, then "
                  f"{list(TAIL)}")
    if len(df) != len(expected):
        raise bad(f"{len(df)} rows where the design has {len(expected)} for this chunk "
                  f"(run_id {expected['run_id'].iloc[0]}..{expected['run_id'].iloc[-1]}); "
                  "the file was cut short or padded")
    ids = pd.to_numeric(df["run_id"], errors="coerce").to_numpy()
    want = expected["run_id"].to_numpy()
    if not np.array_equal(ids, want):
        wrong = int(np.flatnonzero(ids != want)[0])
        raise bad(f"row {wrong + 1} has run_id {df['run_id'].iloc[wrong]}, the design says "
                  f"{want[wrong]}")
    status = df["status"]
    empty = status.isna() | (status.astype(str).str.strip() == "")
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise bad(f"run_id {want[i]} has an empty status (the row was cut mid-value)")
    unknown = sorted(set(status.astype(str)) - set(STATUSES))
    if unknown:
        raise bad(f"unknown status value(s) {unknown}; known: {list(STATUSES)}")
    for c in lead[1:]:
        got = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        ref = pd.to_numeric(expected[c], errors="coerce").to_numpy(dtype=float)
        same = np.isclose(got, ref, rtol=1e-12, atol=0.0, equal_nan=True)
        if not same.all():
            i = int(np.flatnonzero(~same)[0])
            raise bad(f"input {c!r} of run_id {want[i]} is {float(got[i])!r}, the design "
                      f"says {float(ref[i])!r}")
    if meta is None:
        return
    if int(meta.get("runs", len(df))) != len(df):
        raise bad(f"{len(df)} rows, its summary says {meta['runs']} runs")
    counts = {str(k): int(v) for k, v in status.astype(str).value_counts().items()}
    if "status_counts" in meta and dict(sorted(counts.items())) != \
            dict(sorted((str(k), int(v)) for k, v in meta["status_counts"].items())):
        raise bad(f"status counts {counts} differ from its summary's {meta['status_counts']}")
    if meta.get("sha256") and meta["sha256"] != file_sha256(p):
        raise bad("content differs from what its job wrote (sha256 mismatch): the file was "
                  "modified or damaged afterwards")


def merge_chunks(paths: Sequence[str | Path], design: pd.DataFrame, chunk_size: int,
                 metas: Sequence[Mapping[str, Any] | None] | None = None,
                 design_inputs: Sequence[str] | None = None) -> pd.DataFrame:
    """Check and concatenate chunks ``0..n-1`` (``paths[i]`` is chunk ``i``)."""
    n = int(np.ceil(len(design) / chunk_size))
    if len(paths) != n:
        raise DataError("design", f"{len(paths)} chunk files for a design of {len(design)} "
                        f"rows in chunks of {chunk_size} (expected {n})")
    metas = list(metas) if metas else [None] * n
    cols = ["run_id", *(design_inputs or [c for c in design.columns if c != "run_id"])]
    frames = []
    outputs: list[str] | None = None
    for i, path in enumerate(paths):
        df = read_chunk(path)
        check_chunk(df, path, design[cols].iloc[i * chunk_size:(i + 1) * chunk_size], metas[i])
        these = list(df.columns[len(cols):-2])
        if outputs is None:
            outputs = these
        elif these != outputs:
            raise DataError(str(path), f"output columns {these} differ from chunk 0's "
                            f"{outputs}" + _redo(path))
        frames.append(df)
    return pd.concat(frames, ignore_index=True)
