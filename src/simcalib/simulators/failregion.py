"""A failure region for any simulator: runs inside given boxes of the input space fail.

``simulator.fail_region`` makes part of a study's space fail on purpose, so that
what a calibration does with a simulator that fails somewhere (a real external
program whose output key goes missing when an integer input takes its top value) can
be tested and benchmarked without an external program.  It is a mapping
``{input: [lo, hi], ...}`` (one box) or a list of such mappings (their union); a
run fails when every input named by one box lies in ``[lo, hi]`` (ends included).
An integer input at its top value is ``{n: [top, top]}``.

A failed run is a row with status ``error``, NaN outputs and the message
``"in the failure region <box>"``; the inner simulator still runs every row (so a
row's seed and outputs never depend on which other rows failed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators.base import STATUS_ERROR, Simulator

Box = dict[str, tuple[float, float]]


def read_fail_region(spec: Any, inputs: Sequence[str], key: str) -> list[Box]:
    """The boxes of ``simulator.fail_region`` (``None`` or empty: no region), checked
    against the study's input names."""
    if spec is None or spec == {} or spec == []:
        return []
    items = [spec] if isinstance(spec, Mapping) else spec
    if not isinstance(items, list) or not items:
        raise ConfigError(key, "a mapping {input: [lo, hi]} or a list of such mappings")
    boxes: list[Box] = []
    for i, item in enumerate(items):
        k = key if isinstance(spec, Mapping) else f"{key}[{i}]"
        if not isinstance(item, Mapping) or not item:
            raise ConfigError(k, "a non-empty mapping {input: [lo, hi]}")
        box: Box = {}
        for name, ends in item.items():
            if name not in inputs:
                raise ConfigError(f"{k}.{name}", f"not an input of the study; inputs are "
                                  f"{list(inputs)}")
            if (not isinstance(ends, Sequence) or isinstance(ends, str) or len(ends) != 2
                    or not all(isinstance(v, int | float) for v in ends)
                    or float(ends[0]) > float(ends[1])):
                raise ConfigError(f"{k}.{name}", f"[lo, hi] with lo <= hi, got {ends!r}")
            box[str(name)] = (float(ends[0]), float(ends[1]))
        boxes.append(box)
    return boxes


def in_region(inputs: pd.DataFrame, boxes: Sequence[Box]) -> np.ndarray:
    """Rows of ``inputs`` inside the union of ``boxes``."""
    hit = np.zeros(len(inputs), dtype=bool)
    for box in boxes:
        inside = np.ones(len(inputs), dtype=bool)
        for name, (lo, hi) in box.items():
            v = inputs[name].to_numpy(dtype=float)
            inside &= (v >= lo) & (v <= hi)
        hit |= inside
    return hit


def _text(box: Box) -> str:
    return ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, (lo, hi) in box.items())


class FailRegion:
    """Wraps a simulator: rows inside the region come back as failed runs.  Every
    other attribute (outputs, extra columns, ``cancel``, ``probe_row``,
    ``max_parallel``) is the inner simulator's."""

    def __init__(self, inner: Simulator, boxes: Sequence[Box]) -> None:
        self.inner = inner
        self.boxes = list(boxes)
        self.outputs = list(inner.outputs)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy/pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        res = self.inner.run(inputs, seeds, threads).copy()
        hit = in_region(inputs, self.boxes)
        if hit.any():
            values = [c for c in res.columns if c not in ("status", "message")]
            res.loc[hit, values] = np.nan
            res["status"] = res["status"].astype(object)
            res["message"] = res["message"].astype(object)
            res.loc[hit, "status"] = STATUS_ERROR
            msgs = []
            for i in np.flatnonzero(hit):
                row = inputs.iloc[[i]]
                box = next(b for b in self.boxes if in_region(row, [b])[0])
                msgs.append(f"in the failure region ({_text(box)})")
            res.loc[hit, "message"] = msgs
        return res
