"""What a multi-source calibration problem is made of, and checks of its data table.

A problem declares its sources (exactly one high-fidelity source without
calibration parameters, then low-fidelity sources each with its own, possibly
different, list of parameter names), its numeric inputs ``x``, optional categorical
inputs ``t_c`` and its outputs, grouped (an output may be a vector, e.g. the 12
displacements of one direction).  The data are one long table with a ``source``
column, a ``split`` column (train/val/test), the input, parameter and output columns.
A source leaves the parameter columns it does not declare empty (NaN); a missing
output is NaN and is masked out of the loss, not an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError

SPLITS = ("train", "val", "test")


@dataclass
class SourceSpec:
    name: str
    theta: list[str] = field(default_factory=list)
    hf: bool = False


@dataclass
class ProblemSpec:
    sources: list[SourceSpec]
    x: list[str]
    outputs: dict[str, list[str]]
    categorical: list[str] = field(default_factory=list)

    # -- derived views -------------------------------------------------------------
    @property
    def hf(self) -> SourceSpec:
        return next(s for s in self.sources if s.hf)

    @property
    def lf(self) -> list[SourceSpec]:
        return [s for s in self.sources if not s.hf]

    @property
    def theta_names(self) -> list[str]:
        """Union of the parameter names, in order of first declaration: one input slot
        of Block 1 per name (sources sharing a name share the slot)."""
        names: list[str] = []
        for s in self.sources:
            names += [t for t in s.theta if t not in names]
        return names

    @property
    def y_cols(self) -> list[str]:
        return [c for cols in self.outputs.values() for c in cols]

    def source(self, name: str) -> SourceSpec:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def subset(self, names: list[str]) -> ProblemSpec:
        """The problem restricted to the sources of one scenario (HF first)."""
        keep = [s for s in self.sources if s.name in names]
        keep.sort(key=lambda s: not s.hf)          # HF first: it is t_s index 0
        return ProblemSpec(keep, list(self.x), dict(self.outputs), list(self.categorical))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "spec") -> ProblemSpec:
        try:
            # a declaration file, not a config section: a source without ``theta``
            # (the high-fidelity one) has no calibration parameters
            sources = [SourceSpec(str(s["name"]), [str(t) for t in s.get("theta") or []],
                                  bool(s.get("hf", False))) for s in d["sources"]]
            spec = cls(sources, [str(c) for c in d["x"]],
                       {str(k): [str(c) for c in v] for k, v in d["outputs"].items()},
                       [str(c) for c in d.get("categorical", [])])
        except (KeyError, TypeError) as exc:
            raise ConfigError(where, f"malformed problem declaration ({exc!r})") from None
        spec.check(where)
        return spec

    def check(self, where: str = "spec") -> None:
        """Declaration errors: these are config mistakes, so ConfigError."""
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}.sources", f"duplicate source names in {names}")
        hfs = [s for s in self.sources if s.hf]
        if len(hfs) != 1:
            raise ConfigError(f"{where}.sources",
                              f"exactly one high-fidelity source needed, got {len(hfs)}")
        if hfs[0].theta:
            raise ConfigError(f"{where}.sources.{hfs[0].name}.theta",
                              "the high-fidelity source has no calibration parameters; "
                              f"got {hfs[0].theta}")
        for s in self.lf:
            if not s.theta:
                raise ConfigError(f"{where}.sources.{s.name}.theta",
                                  "a low-fidelity source needs at least one calibration "
                                  "parameter")
            if len(set(s.theta)) != len(s.theta):
                raise ConfigError(f"{where}.sources.{s.name}.theta",
                                  f"duplicate parameter names {s.theta}")
        if not self.x:
            raise ConfigError(f"{where}.x", "at least one numeric input is needed")
        if not self.y_cols:
            raise ConfigError(f"{where}.outputs", "at least one output is needed")
        clash = set(self.x) & set(self.theta_names) | set(self.y_cols) & (
            set(self.x) | set(self.theta_names))
        if clash:
            raise ConfigError(where, f"column(s) {sorted(clash)} declared twice")


def _check_hf(df: pd.DataFrame, rows: pd.DataFrame, s: SourceSpec, others: list[str],
              file: str) -> None:
    extra = [t for t in df.columns if t in others and rows[t].notna().any()]
    if extra:
        raise DataError(file, f"high-fidelity source '{s.name}' has calibration "
                              f"values in column(s) {extra}; it must have none")


def _check_lf(df: pd.DataFrame, rows: pd.DataFrame, s: SourceSpec, others: list[str],
              file: str) -> None:
    """A low-fidelity source's parameter columns: present, numeric, given in its
    training rows, and no values in the columns of parameters it does not declare."""
    absent = [t for t in s.theta if t not in df.columns]
    if absent:
        raise DataError(file, f"source '{s.name}' declares parameter(s) {absent} "
                              "but the table has no such column(s)")
    for t in s.theta:
        if not pd.api.types.is_numeric_dtype(rows[t]):
            raise DataError(file, f"parameter column '{t}' of source '{s.name}' "
                                  "is not numeric")
        if rows.loc[rows["split"] == "train", t].isna().all():
            raise DataError(file, f"source '{s.name}' declares parameter '{t}' "
                                  "but has no values for it in its training rows")
    extra = [t for t in others if t in df.columns and rows[t].notna().any()]
    if extra:
        raise DataError(file, f"source '{s.name}' has values in parameter column(s) "
                              f"{extra} that it does not declare (declared: {s.theta})")


def _check_values(df: pd.DataFrame, spec: ProblemSpec, file: str) -> None:
    """Inputs and outputs numeric, inputs complete, outputs finite where given."""
    for c in [*spec.x, *spec.y_cols]:
        if not pd.api.types.is_numeric_dtype(df[c]):
            raise DataError(file, f"column '{c}' is not numeric")
    nan_x = [c for c in spec.x if df[c].isna().any()]
    if nan_x:
        raise DataError(file, f"input column(s) {nan_x} have missing values")
    for c in spec.y_cols:
        if np.isinf(df[c].to_numpy(dtype=float)).any():
            raise DataError(file, f"output column '{c}' has infinite values")


def check_frame(df: pd.DataFrame, spec: ProblemSpec, file: str = "data") -> pd.DataFrame:
    """Check a data table against the declaration; returns it with the rows of the
    declared sources only.  Raises DataError naming the file, source and column.
    Stages: columns and splits -> each source (training rows; the high-fidelity one
    has no parameter values, a low-fidelity one its own only) -> the values."""
    need = ["source", "split", *spec.x, *spec.categorical, *spec.y_cols]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(file, f"missing column(s) {missing}; has {list(df.columns)}")
    df = df[df["source"].astype(str).isin([s.name for s in spec.sources])].copy()
    df["source"] = df["source"].astype(str)
    bad_split = sorted(set(df["split"]) - set(SPLITS))
    if bad_split:
        raise DataError(file, f"column 'split' has values {bad_split}; allowed {list(SPLITS)}")
    for s in spec.sources:
        rows = df[df["source"] == s.name]
        if not (rows["split"] == "train").any():
            raise DataError(file, f"source '{s.name}' has no training rows")
        others = [t for t in spec.theta_names if t not in s.theta]
        (_check_hf if s.hf else _check_lf)(df, rows, s, others, file)
    _check_values(df, spec, file)
    return df.reset_index(drop=True)
