"""Scaling and the tensors one training step consumes.

Every numeric column is scaled to mean 0 and sd 1 with training statistics (the
network uses tanh everywhere, paper §4).  Parameter columns are scaled per name,
pooled over the low-fidelity sources that declare it.

A step's batch stacks two kinds of rows and feeds them through the network in one
pass:

- *emulation rows*: every source's own rows, with its own parameter data (masked to
  the slots it declares; the high-fidelity source has no slot, so whatever dummy
  value sits in its parameter columns is multiplied by 0 and cannot reach the
  network);
- *calibration rows*: the high-fidelity rows, copied once per low-fidelity source j
  with ``t_s = s_j`` and, in the model, the sampled parameters theta-hat of s_j.

Weights ``w`` implement the per-source normalisation of Eq. 3-4: each (source,
output column) cell is averaged over its own non-missing rows, and a missing output
(NaN) gets weight 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch

from simcalib.multisource.problem import ProblemSpec


def _sd(a: np.ndarray) -> np.ndarray:
    sd = np.nanstd(a, axis=0)
    return np.where(np.isfinite(sd) & (sd > 1e-12), sd, 1.0)


@dataclass
class Scaling:
    x_mean: list[float]
    x_sd: list[float]
    th_mean: list[float]
    th_sd: list[float]
    y_mean: list[float]
    y_sd: list[float]
    cat_levels: list[str]

    @classmethod
    def fit(cls, train: pd.DataFrame, spec: ProblemSpec) -> Scaling:
        x = train[spec.x].to_numpy(float)
        y = train[spec.y_cols].to_numpy(float)
        lf = train[train["source"] != spec.hf.name]
        th = (lf[spec.theta_names].to_numpy(float) if spec.theta_names
              else np.zeros((len(lf), 0)))
        th_mean = np.nanmean(th, axis=0) if th.size else np.zeros(th.shape[1])
        return cls(x.mean(0).tolist(), _sd(x).tolist(),
                   np.nan_to_num(th_mean).tolist(), _sd(th).tolist() if th.size else [],
                   np.nanmean(y, axis=0).tolist(), _sd(y).tolist(),
                   sorted(set(cat_keys(train, spec))))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Scaling:
        return cls(**d)

    def theta_to_scaled(self, th: np.ndarray) -> np.ndarray:
        return (th - np.asarray(self.th_mean)) / np.asarray(self.th_sd)

    def theta_from_scaled(self, th: np.ndarray) -> np.ndarray:
        return th * np.asarray(self.th_sd) + np.asarray(self.th_mean)

    def y_from_scaled(self, y: np.ndarray, sd: bool = False) -> np.ndarray:
        ys = np.asarray(self.y_sd)
        return y * ys if sd else y * ys + np.asarray(self.y_mean)


def cat_keys(df: pd.DataFrame, spec: ProblemSpec) -> list[str]:
    """One categorical level per combination of the categorical columns (zeta(t_c))."""
    if not spec.categorical:
        return [""] * len(df)
    return df[spec.categorical].astype(str).agg("|".join, axis=1).tolist()


@dataclass
class Rows:
    """Emulation rows as tensors (scaled; NaN replaced by 0 and flagged)."""

    src: torch.Tensor          # [N] long, index into the scenario's sources (HF = 0)
    x: torch.Tensor            # [N, dx]
    cat: torch.Tensor          # [N, n_levels] one-hot (n_levels may be 1)
    theta: torch.Tensor        # [N, K] scaled parameter data, 0 where absent
    theta_nan: torch.Tensor    # [N, K] bool: declared slot without a value -> theta-hat
    y: torch.Tensor            # [N, ny]
    valid: torch.Tensor        # [N, ny] float 1/0: output present

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def take(self, idx: torch.Tensor) -> Rows:
        return Rows(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))


def to_rows(df: pd.DataFrame, spec: ProblemSpec, scaling: Scaling,
            dtype: torch.dtype = torch.float32) -> Rows:
    names = [s.name for s in spec.sources]
    src = df["source"].map({n: i for i, n in enumerate(names)}).to_numpy()
    x = (df[spec.x].to_numpy(float) - np.asarray(scaling.x_mean)) / np.asarray(scaling.x_sd)
    K = len(spec.theta_names)
    th = df[spec.theta_names].to_numpy(float) if K else np.zeros((len(df), 0))
    th = scaling.theta_to_scaled(th) if K else th
    declared = slot_mask(spec)[src]                       # [N, K]
    th_nan = np.isnan(th) & (declared > 0)
    th = np.where(np.isnan(th), 0.0, th)
    levels = {lv: i for i, lv in enumerate(scaling.cat_levels)}
    keys = cat_keys(df, spec)
    cat = np.zeros((len(df), max(1, len(levels))))
    for r, k in enumerate(keys):
        if k in levels:            # unseen level: all-zero one-hot
            cat[r, levels[k]] = 1.0
    y = (df[spec.y_cols].to_numpy(float) - np.asarray(scaling.y_mean)) / np.asarray(scaling.y_sd)
    valid = np.isfinite(y)
    y = np.where(valid, y, 0.0)
    t = lambda a: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    return Rows(torch.as_tensor(np.array(src, dtype=np.int64)), t(x), t(cat), t(th),
                torch.as_tensor(np.array(th_nan)), t(y), t(valid))


def slot_mask(spec: ProblemSpec) -> np.ndarray:
    """[n_sources, K]: 1 where a source declares the parameter of that slot."""
    names = spec.theta_names
    m = np.zeros((len(spec.sources), len(names)))
    for i, s in enumerate(spec.sources):
        for t in s.theta:
            m[i, names.index(t)] = 1.0
    return m


@dataclass
class Batch:
    """Emulation rows followed by calibration rows, ready for one forward pass."""

    src: torch.Tensor
    x: torch.Tensor
    cat: torch.Tensor
    theta: torch.Tensor
    theta_nan: torch.Tensor
    is_cal: torch.Tensor       # [N, 1] bool
    y: torch.Tensor
    w: torch.Tensor            # [N, ny] loss weights (per-source normalisation, NaN mask)


def _norm_weights(src: torch.Tensor, valid: torch.Tensor, n_src: int) -> torch.Tensor:
    onehot = torch.nn.functional.one_hot(src, n_src).to(valid.dtype)   # [N, S]
    counts = onehot.T @ valid                                          # [S, ny]
    per_row = counts[src]
    return torch.where(per_row > 0, valid / per_row.clamp_min(1.0), torch.zeros_like(valid))


def make_batch(rows: Rows, n_sources: int, lf_index: list[int]) -> Batch:
    """Stack the emulation rows and one copy of the HF rows per low-fidelity source."""
    w_em = _norm_weights(rows.src, rows.valid, n_sources)
    hf = rows.take(torch.nonzero(rows.src == 0).flatten())
    parts_src, parts_w = [rows.src], [w_em]
    n_hf = len(hf)
    w_hf = _norm_weights(torch.zeros(n_hf, dtype=torch.long), hf.valid, 1)
    for j in lf_index:
        parts_src.append(torch.full((n_hf,), j, dtype=torch.long))
        parts_w.append(w_hf)
    m = len(lf_index)
    return Batch(
        src=torch.cat(parts_src),
        x=torch.cat([rows.x] + [hf.x] * m),
        cat=torch.cat([rows.cat] + [hf.cat] * m),
        theta=torch.cat([rows.theta] + [torch.zeros_like(hf.theta)] * m),
        theta_nan=torch.cat([rows.theta_nan] + [torch.zeros_like(hf.theta_nan)] * m),
        is_cal=torch.cat([torch.zeros(len(rows), 1, dtype=torch.bool),
                          torch.ones(n_hf * m, 1, dtype=torch.bool)]),
        y=torch.cat([rows.y] + [hf.y] * m),
        w=torch.cat(parts_w),
    )
