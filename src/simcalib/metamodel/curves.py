r"""A metamodel of a study with series outputs (issue 42): the network predicts each
series' basis weights (:mod:`simcalib.metamodel.basis`), and the decode is folded into
its last layer, so the result is an ordinary :class:`~.model.Metamodel` whose outputs
are the study's outputs (scalars and every point ``cases@7``).

Why fold: a curve is ``mu + scale * V w`` with w the weights, and the network's last
layer is affine, so with standardised weights ``y = W h + b`` (``w = m + d * y``) the
standardised curve ``(curve - mu) / scale = V (d * (W h + b) + m)`` is again one
affine layer ``W' = V diag(d) W``, ``b' = V (d * b + m)``.  Every consumer of a
metamodel (prediction, Delta with ``output_scale`` = ``y_std``, the records' ``pred_*``
columns, the MILP, MC dropout, the failure model, saving and loading) then works on
curves unchanged: ``y_mean`` of a point is the basis mean there and its ``y_std`` the
series' scale, so Delta's default divisor at every point of a series is that series'
one scale (the unit its basis was fitted in).  The weights are recovered exactly
(``V`` has orthonormal columns): :func:`weight_head` gives the layer from the last
hidden activations to the weights, which a compact MILP (k weight columns instead of
m outputs, :mod:`simcalib.metamodel.milp.series_misfit`) builds on.

The basis is fitted on the training split only, so the test R² of the reconstructed
curve counts the basis's truncation error on unseen runs as well as the network's.

Recorded in metamodel.json under ``series`` (per series): the basis
(:meth:`SeriesBasis.to_json`: points, mean, scale, components, errors), ``test_r2``
of the reconstructed curve pooled over its points (1 - SSE / SST: what the trust flag
judges, :func:`simcalib.metamodel.trust.judge`), the held-out reconstruction error of
the basis (``basis_cv_rms``, and relative to the scale), the weights' own test R² and,
with a noise probe, the noise ceiling of the curve and of every weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from simcalib.config import schema_defaults
from simcalib.errors import DataError
from simcalib.metamodel.basis import DEFAULT_MIN_RUNS, SeriesBasis, fit_basis
from simcalib.metamodel.model import DTYPE, Metamodel
from simcalib.study.series import parse_column

#: separates a series' name from its weight's number in the inner network's outputs
WEIGHT_SEP = "#"


def series_groups(outputs: Sequence[str]) -> tuple[list[int], dict[str, list[int]]]:
    """(positions of the scalar outputs, {series: positions of its points})."""
    scalars: list[int] = []
    groups: dict[str, list[int]] = {}
    for j, o in enumerate(outputs):
        p = parse_column(o)
        if p is None:
            scalars.append(j)
        else:
            groups.setdefault(p[0], []).append(j)
    return scalars, groups


def has_series(outputs: Sequence[str]) -> bool:
    return bool(series_groups(outputs)[1])




def fit_bases(Y: np.ndarray, outputs: Sequence[str], rows: np.ndarray,
              cfg: Mapping[str, Any], noise: Mapping[str, Any] | None = None,
              min_runs: int = DEFAULT_MIN_RUNS, where: str | None = None
              ) -> dict[str, SeriesBasis]:
    """Each series' basis on ``rows`` (the training split); with a noise probe's pair
    differences, cut before the first component that is more noise than signal
    (:func:`noise_cut`).  ``min_runs``/``where``: :func:`fit_basis`'s least number of
    runs, and what the rows are in an error message (default: the metamodel's
    training split)."""
    _, groups = series_groups(outputs)
    # the section has no top-level default (a scalar study's metamodel config stays as
    # it was), so its keys' defaults are filled here, from the schema
    opts = schema_defaults("metamodel.schema.yaml",
                           base={"series": dict(cfg.get("series") or {})})["series"]
    out = {}
    for name, idx in groups.items():
        points = np.array([parse_column(outputs[j])[1] for j in idx])  # type: ignore[index]
        y = Y[np.ix_(rows, idx)]
        try:
            b = fit_basis(y, points, name, variance=float(opts["variance"]),
                          max_components=opts["max_components"], min_runs=min_runs)
        except DataError as exc:
            rows_are = where or (f"the metamodel's training split: {len(rows)} of the "
                                 f"dataset's {len(Y)} usable runs")
            raise DataError(exc.source, f"{exc.message} (the basis is fitted on "
                            f"{rows_are})") from None
        diff = ((noise or {}).get("series_diff") or {}).get(name)
        floor = opts["min_weight_ceiling"]
        k = noise_cut(b, y, diff, floor) if diff is not None and floor else b.k
        if k < b.k:
            kept = fit_basis(y, points, name, variance=float(opts["variance"]),
                             max_components=k, min_runs=min_runs)
            kept.error["noise_cut_from"] = b.k
            b = kept
        out[name] = b
    return out


def weight_ceilings(b: SeriesBasis, y: np.ndarray, diff: Any) -> np.ndarray:
    """Each weight's noise ceiling, 1 - noise variance / variance over ``y``'s runs;
    the noise variance from the probe's pair differences projected on the basis
    (half the mean square of a difference of two replicates)."""
    d = np.asarray(diff, dtype=float)
    if d.ndim != 2 or d.shape[1] != len(b.points) or len(d) < 2:
        return np.full(b.k, np.nan)
    nv = (((d / b.scale) @ b.components) ** 2).mean(axis=0) / 2.0
    tv = b.encode(y).var(axis=0)
    return np.where(tv > 0, np.maximum(0.0, 1.0 - nv / np.where(tv > 0, tv, 1.0)), np.nan)


def noise_cut(b: SeriesBasis, y: np.ndarray, diff: Any, floor: float) -> int:
    """The number of leading components to keep: all before the first whose noise
    ceiling is below ``floor`` (at least one).  Why: such a weight varies between two
    runs at one input as much as across the design, so the network can only learn its
    mean, and fitting it costs accuracy on the others.  Measured on the epidemic's
    case curve (34 points, a 40-pair probe): 320 runs, 6 components -> 3, curve test
    R² 0.812 -> 0.850 (share of its noise ceiling 0.885 -> 0.927); 160 runs, 6 -> 3,
    0.664 -> 0.675.  The ceilings are judged on the training runs the basis was fitted
    to, which flatters the trailing components: the floor is a cautious cut."""
    ceil = weight_ceilings(b, y, diff)
    low = np.flatnonzero(~(ceil >= float(floor)))
    return max(1, int(low[0])) if len(low) else b.k


def reduced_frame(X: np.ndarray, Y: np.ndarray, inputs: Sequence[str],
                  outputs: Sequence[str], bases: Mapping[str, SeriesBasis]
                  ) -> tuple[pd.DataFrame, list[str]]:
    """Inputs, scalar outputs and every series' weights (all rows ok): the table the
    inner network is trained on, and its output names."""
    scalars, groups = series_groups(outputs)
    cols: dict[str, np.ndarray] = {n: X[:, i] for i, n in enumerate(inputs)}
    names = [outputs[j] for j in scalars]
    cols.update({outputs[j]: Y[:, j] for j in scalars})
    for name, idx in groups.items():
        w = bases[name].encode(Y[:, idx])
        for i in range(w.shape[1]):
            cols[f"{name}{WEIGHT_SEP}{i}"] = w[:, i]
            names.append(f"{name}{WEIGHT_SEP}{i}")
    df = pd.DataFrame(cols)
    df["status"] = "ok"
    return df, names


def fold_layer(W: np.ndarray, b: np.ndarray, inner_names: Sequence[str],
               inner_mean: np.ndarray, inner_std: np.ndarray, outputs: Sequence[str],
               bases: Mapping[str, SeriesBasis]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The folded last layer (module docstring): the inner layer ``(W, b)`` predicts
    the standardised inner outputs ``inner_names`` (scalars, then ``<series>#i``
    weights; raw = ``inner_mean + inner_std * y``).  Returns ``(W', b', y_mean, y_std)``
    over ``outputs``: a scalar keeps its row and scalers, a series' points get
    ``V diag(d) W`` and ``V (d b + m)`` with the basis mean and scale as scalers."""
    W, b = np.asarray(W, dtype=float), np.asarray(b, dtype=float)
    inner_mean, inner_std = np.asarray(inner_mean, float), np.asarray(inner_std, float)
    pos = {n: i for i, n in enumerate(inner_names)}
    scalars, groups = series_groups(outputs)
    T = len(outputs)
    Wn, bn = np.zeros((T, W.shape[1])), np.zeros(T)
    y_mean, y_std = np.zeros(T), np.ones(T)
    for j in scalars:
        i = pos[outputs[j]]
        Wn[j], bn[j], y_mean[j], y_std[j] = W[i], b[i], inner_mean[i], inner_std[i]
    for name, idx in groups.items():
        ws = [pos[f"{name}{WEIGHT_SEP}{i}"] for i in range(bases[name].k)]
        V, d, m = bases[name].components, inner_std[ws], inner_mean[ws]
        Wn[idx] = V @ (d[:, None] * W[ws])
        bn[idx] = V @ (d * b[ws] + m)
        y_mean[idx], y_std[idx] = bases[name].mean, bases[name].scale
    return Wn, bn, y_mean, y_std


def unfold_layer(Wn: np.ndarray, bn: np.ndarray, y_mean: np.ndarray, y_std: np.ndarray,
                 outputs: Sequence[str], bases: Mapping[str, SeriesBasis],
                 inner_names: Sequence[str], inner_mean: np.ndarray, inner_std: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of :func:`fold_layer` onto a (possibly other) basis: the inner layer
    over ``inner_names`` (standardised by ``inner_mean``/``inner_std``) that predicts
    the projection of the folded layer's curves on ``bases``.  Why: ``sequential``
    refits the basis every round and warm-starts its nets from the last round's; the
    old nets' curves projected on the new basis are where training continues from
    (exact where the old curves lie in the new basis's span, the least-squares weights
    otherwise).  With the basis the layer was folded with, the inner layer is
    recovered exactly (``V^T V = I``)."""
    Wn, bn = np.asarray(Wn, dtype=float), np.asarray(bn, dtype=float)
    y_mean, y_std = np.asarray(y_mean, float), np.asarray(y_std, float)
    inner_mean, inner_std = np.asarray(inner_mean, float), np.asarray(inner_std, float)
    pos = {n: i for i, n in enumerate(inner_names)}
    scalars, groups = series_groups(outputs)
    W, b = np.zeros((len(inner_names), Wn.shape[1])), np.zeros(len(inner_names))
    for j in scalars:
        i = pos[outputs[j]]
        W[i] = y_std[j] / inner_std[i] * Wn[j]
        b[i] = (y_mean[j] + y_std[j] * bn[j] - inner_mean[i]) / inner_std[i]
    for name, idx in groups.items():
        B = bases[name]
        ws = [pos[f"{name}{WEIGHT_SEP}{i}"] for i in range(B.k)]
        V, d, m = B.components, inner_std[ws], inner_mean[ws]
        W[ws] = (V.T @ (y_std[idx, None] * Wn[idx]) / B.scale) / d[:, None]
        b[ws] = (V.T @ ((y_mean[idx] + y_std[idx] * bn[idx] - B.mean) / B.scale) - m) / d
    return W, b


def fold(inner: Metamodel, outputs: Sequence[str], bases: Mapping[str, SeriesBasis],
         info: Mapping[str, Any]) -> Metamodel:
    """The metamodel over ``outputs`` whose last layer decodes the inner network's
    weights (module docstring; the layer by :func:`fold_layer`)."""
    import copy

    net = copy.deepcopy(inner.net)
    last = net[len(net) - 1]
    Wn, bn, y_mean, y_std = fold_layer(last.weight.detach().numpy(),
                                       last.bias.detach().numpy(), inner.output_names,
                                       inner.y_mean, inner.y_std, outputs, bases)
    new_last = torch.nn.Linear(Wn.shape[1], len(outputs)).to(DTYPE)
    with torch.no_grad():
        new_last.weight.copy_(torch.as_tensor(Wn, dtype=DTYPE))
        new_last.bias.copy_(torch.as_tensor(bn, dtype=DTYPE))
    net[len(net) - 1] = new_last
    return Metamodel(net, inner.input_names, outputs, inner.x_mean, inner.x_std, y_mean,
                     y_std, info)


def weight_head(mm: Metamodel, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(W, b)``: series ``name``'s basis weights as an affine map of the last hidden
    layer's activations (``w = W h + b``, raw weight units), recovered exactly from the
    folded layer (``V^T V = I``)."""
    basis = bases_of(mm)[name]
    idx = [j for j, o in enumerate(mm.output_names)
           if (p := parse_column(o)) is not None and p[0] == name]
    W, b = mm.linear_layers()[-1]
    V = basis.components
    return V.T @ W[idx], V.T @ b[idx]


def bases_of(mm: Any) -> dict[str, SeriesBasis]:
    """The series bases recorded in a metamodel's info (empty for a scalar one)."""
    rec = (getattr(mm, "info", None) or {}).get("series") or {}
    return {n: SeriesBasis.from_json(r["basis"], f"metamodel series {n!r}")
            for n, r in rec.items()}


def series_record(bases: Mapping[str, SeriesBasis], outputs: Sequence[str],
                  Y_test: np.ndarray, P_test: np.ndarray, inner_r2: Mapping[str, float],
                  noise: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``series`` entry of metamodel.json (module docstring)."""
    _, groups = series_groups(outputs)
    out: dict[str, Any] = {}
    for name, idx in groups.items():
        b = bases[name]
        y, p = Y_test[:, idx], P_test[:, idx]
        sst = float(((y - y.mean(axis=0)) ** 2).sum())
        r2 = 1.0 - float(((y - p) ** 2).sum()) / sst if sst > 0 else float("nan")
        rec: dict[str, Any] = {
            "points": len(idx), "components": b.k, "test_r2": r2,
            "weights_test_r2": {k: float(v) for k, v in inner_r2.items()
                                if k.startswith(f"{name}{WEIGHT_SEP}")},
            "basis_cv_rms": float(b.error["cv_rms"]),
            "basis_cv_relative": float(b.error["cv_rms"]) / b.scale,
            "basis_unexplained": float(b.error["unexplained"]),
            "basis": b.to_json()}
        if noise:
            rec["noise"] = _series_noise(b, [outputs[j] for j in idx], y, noise)
        out[name] = rec
    return out


def _series_noise(b: SeriesBasis, cols: Sequence[str], y: np.ndarray,
                  noise: Mapping[str, Any]) -> dict[str, Any]:
    """The curve's pooled noise ceiling (1 - sum of point noise variances / sum of
    total variances: the ceiling of the pooled R²) and, where the probe's pair
    differences are known, each weight's."""
    var = noise.get("var") or {}
    nv = float(sum(float(var.get(c, 0.0)) for c in cols))
    tv = float(np.var(y, axis=0).sum())
    rec: dict[str, Any] = {"ceiling": max(0.0, 1.0 - nv / tv) if tv > 0 else float("nan")}
    diff = (noise.get("series_diff") or {}).get(b.name)
    if diff is not None:
        rec["weight_ceiling"] = weight_ceilings(b, y, diff).tolist()
    if "noise_cut_from" in b.error:
        rec["cut_from_components"] = int(b.error["noise_cut_from"])
    return rec
