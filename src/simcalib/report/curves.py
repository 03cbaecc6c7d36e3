"""What a user of a curve study looks at (issue 42, item 4): per target and series, the
observed curve beside the answer's curve and a band of fresh re-simulations there,
with the misfit per point and per series.

One long table per strategy (``results/<study>/curves/<strategy>.csv``; on an extra
target set ``results/<study>/curves/targets_<name>/<strategy>.csv``), a row per target,
series and point:

``target_id, series, point``
    which curve and where (the point is the series' index value, e.g. the day);
``observed, sd``
    the target's value there (NaN where the target does not observe that point) and
    its ``sd_<series>`` (NaN where none is given);
``weight``
    what multiplies ``|curve - observed|`` in Δ at that point: the target's weight over
    Δ's divisor (:func:`simcalib.study.observations.output_weights`: the observation's
    sd where given, else the study's scale as the strategies computed it
    (:func:`delta_scale`: one per series), and 1/m over the m points a target
    observes, so each series counts as one output); 0 at an unobserved point;
``answer, predicted``
    the strategy's answer: the simulated curve of its chosen run (``sim_*`` of the
    records) and the metamodel's curve there (``pred_*``; NaN without a metamodel);
``resim_median, band_low, band_high, replicates, band_percent_low, band_percent_high,
stochastic``
    the simulator re-run at the answer on fresh seeds: the median and the percentiles
    over ``replicates`` successful runs, and whether the runs differed.  The runs are
    the re-scoring replicates (:func:`simcalib.metamodel.strategies.runner.rescore`:
    stream ``rescore:<target>``, run ids 0..n-1), so with ``calibration.rescore`` = n
    their mean misfit is the records' ``rescored_error`` and every strategy sees the
    same random numbers.  On a deterministic simulator one run is made (the band is
    that curve);
``post_median, post_low, post_high, post_runs, post_from``
    the posterior predictive band: the median and the same percentiles of the
    simulator at ``post_runs`` posterior draws of the target (NaN and 0 without
    one), and which posterior drew them.  For ``sequential``'s answers, where its
    own posterior ran (``cal_seq_posterior``), that posterior
    (:data:`SEQUENTIAL_POSTERIOR`): it writes draws but runs no predictive check, so
    ``calibration.posterior.ppc_draws`` of its draws per target are run here
    (:func:`posterior_predictive_runs`; counted in the job's log).  For the other
    strategies, and for ``sequential`` without its own, the design posterior's
    predictive check (``cal_posterior``'s ``ppc_runs.csv``, :data:`DESIGN_POSTERIOR`),
    at no extra run;
``misfit_answer, misfit_resim``
    the point's term of Δ, ``weight * |curve - observed|``: of the answer's curve, and
    its mean over the replicates.  Summed over a series' points they are the series'
    weighted L1 misfit (:func:`series_misfit`); summed over every output (scalars too)
    the first is the answer's Δ and the second its re-scored Δ.  (On a stochastic
    simulator a strategy that selects by mean records as ``error`` the mean Δ of its
    selection runs at the answer, of which ``sim_*`` is one: the two then differ.)

Why the re-scoring streams: a band drawn from other seeds would disagree with the
re-scored Δ the page recommends by, for no reason a reader could see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.study.model import Study
from simcalib.study.observations import SD_PREFIX, output_weights
from simcalib.study.series import parse_column

#: run-log phases of a search's start runs, whose sd is Δ's scale without a metamodel
#: (:meth:`simcalib.metamodel.strategies.scale.RunScale.settle`)
START_PHASES = ("sobol", "design")

COLUMNS = ["target_id", "series", "point", "observed", "sd", "weight", "answer",
           "predicted", "resim_median", "band_low", "band_high", "replicates",
           "band_percent_low", "band_percent_high", "stochastic", "post_median", "post_low",
           "post_high", "post_runs", "post_from", "misfit_answer", "misfit_resim"]

#: ``post_from`` of a band from the design posterior's predictive check
DESIGN_POSTERIOR = "the design posterior"
#: ``post_from`` of a band from ``sequential``'s own posterior (its answers only)
SEQUENTIAL_POSTERIOR = "sequential's own posterior"


@dataclass(frozen=True)
class Band:
    """How the band is drawn: ``replicates`` fresh runs at the answer (on a stochastic
    simulator), the ``low``-``high`` percentiles of them per point."""

    replicates: int
    low: float
    high: float

    def __post_init__(self) -> None:
        if self.replicates < 1:
            raise ConfigError("--replicates", f"need at least 1 replicate, got "
                              f"{self.replicates}")
        if not 0 <= self.low < 50 < self.high <= 100:
            raise ConfigError("--band", f"percentiles must satisfy 0 <= low < 50 < high <= "
                              f"100, got {self.low:g} {self.high:g}")


def series_point_columns(outputs: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """``{series: [(column, point), ...]}`` of the point columns among ``outputs`` (the
    columns with their index values, which the table's rows need; not
    :func:`simcalib.metamodel.curves.series_groups`, which gives positions)."""
    out: dict[str, list[tuple[str, float]]] = {}
    for o in outputs:
        p = parse_column(o)
        if p is not None:
            out.setdefault(p[0], []).append((o, p[1]))
    return out


def delta_scale(outputs: Sequence[str], meta: Mapping[str, Any] | None = None,
                runs: pd.DataFrame | None = None) -> tuple[np.ndarray, str]:
    """Δ's per-output divisor before the targets' sds and weights, computed by the very
    code the strategies used (never a copy of it, which drifted once: a per-point sd
    where the strategies give a series one scale, so the table's misfit did not add up
    to the records' Δ): the metamodel's training sd (``metamodel.json``'s ``y_std``
    through :func:`~simcalib.metamodel.strategies.ledger.output_scale`), else, for a
    study without a metamodel, :meth:`~simcalib.metamodel.strategies.scale.RunScale.settle`
    on the search's successful start runs (the run log's phases :data:`START_PHASES`:
    one scale per series, the root mean of its points' variances), else 1.
    Returns (scale, where it came from, in the strategies' words).  Where a target gives
    ``sd_<output>``, the divisor is that sd whatever this scale is."""
    from types import SimpleNamespace

    from simcalib.metamodel.strategies.ledger import output_scale
    from simcalib.metamodel.strategies.scale import TRAINING_SD, RunScale

    outputs = list(outputs)
    if meta is not None and meta.get("y_std") is not None:
        names = list(meta.get("output_names") or [])
        missing = [o for o in outputs if o not in names]
        if missing:
            raise DataError("metamodel.json", f"no y_std for output(s) {missing[:5]}")
        s = output_scale(SimpleNamespace(output_names=names, y_std=meta["y_std"]))
        return np.array([s[names.index(o)] for o in outputs]), TRAINING_SD
    if runs is not None and "phase" in runs and set(outputs) <= set(runs.columns):
        start = runs[runs["phase"].isin(START_PHASES)]
        if "status" in start:
            start = start[start["status"] == "ok"]
        if len(start):
            mm = RunScale([], outputs)
            mm.settle(start[outputs].to_numpy(dtype=float))
            return output_scale(mm), mm.source
    return np.ones(len(outputs)), "1 (no metamodel and no start runs)"


def point_weights(targets: pd.DataFrame, outputs: Sequence[str],
                  scale: np.ndarray) -> pd.DataFrame:
    """Per target (index ``target_id``) and output: what multiplies ``|y - z|`` in Δ
    (weight over divisor), 0 at a point the target does not observe."""
    w = output_weights(targets, list(outputs), np.asarray(scale, dtype=float))
    return pd.DataFrame(w / np.asarray(scale, dtype=float), columns=list(outputs),
                        index=targets["target_id"].astype(np.int64).to_numpy())


def replicates_at(study: Study, x: np.ndarray, context: Mapping[str, float],
                  target_id: int, n: int, seed: int, outputs: Sequence[str],
                  stochastic: bool | None, threads: int = 1) -> tuple[np.ndarray, bool]:
    """The study's outputs of fresh runs at ``x``: (rows of successful runs, whether
    the simulator behaved stochastically).  ``stochastic`` False: one run; True: ``n``;
    None (unknown): two runs first, and the rest only if they differ (a simulator
    whose two seeds give the same bits is deterministic: more runs would repeat it;
    fewer than two successful runs cannot tell, and count as noisy)."""
    from simcalib.metamodel.strategies.runner import rescore_runs

    first = 1 if stochastic is False else (2 if stochastic is None else n)
    res = rescore_runs(study, x, context, target_id, np.arange(first), seed, threads)
    noisy = bool(stochastic)
    if stochastic is None:
        Y0 = res[list(outputs)].to_numpy(dtype=float)
        ok0 = (res["status"] == "ok").to_numpy()
        noisy = bool(ok0.sum() < 2 or not np.array_equal(Y0[ok0][0], Y0[ok0][1]))
        if noisy and n > first:
            more = rescore_runs(study, x, context, target_id, np.arange(first, n), seed,
                                threads)
            res = pd.concat([res, more], ignore_index=True)
        res = res.iloc[:n] if noisy else res.iloc[:1]
    ok = (res["status"] == "ok").to_numpy()
    return res.loc[ok, list(outputs)].to_numpy(dtype=float), noisy


def posterior_runs(ppc_runs: pd.DataFrame | None, columns: Sequence[str]
                   ) -> dict[int, np.ndarray]:
    """Per target, the successful predictive-check runs' values at ``columns`` (rows:
    runs); empty without a check or when it lacks the point columns (a posterior of
    the scalars only)."""
    if ppc_runs is None or "target_id" not in ppc_runs or not set(columns) <= set(
            ppc_runs.columns):
        return {}
    ok = ppc_runs[ppc_runs["status"] == "ok"] if "status" in ppc_runs else ppc_runs
    out = {}
    for tid, part in ok.groupby("target_id"):
        Y = part[list(columns)].to_numpy(dtype=float)
        out[int(tid)] = Y[np.isfinite(Y).all(axis=1)]
    return out


def posterior_draws(path: str | Path, names: Sequence[str]) -> np.ndarray:
    """A target's posterior draws from its netCDF (``targets/target_<id>.nc`` of a
    posterior's directory), (draws, inputs) in ``names`` order; an unreadable file or
    a missing input is an error naming the file."""
    from simcalib.bayes.posterior import read_netcdf

    post = read_netcdf(path).posterior
    missing = [n for n in names if n not in post]
    if missing:
        raise DataError(str(path), f"no posterior draws of input(s) {missing}")
    return np.column_stack([np.asarray(post[n].values, dtype=float).reshape(-1)
                            for n in names])


def posterior_predictive_runs(study: Study, draws_dir: str | Path, targets: pd.DataFrame,
                              target_ids: Sequence[int], k: int, seed: int,
                              threads: int = 1) -> pd.DataFrame:
    """The simulator at ``k`` draws per target of a posterior that wrote its draws
    (``<draws_dir>/target_<id>.nc``) but ran no predictive check (``sequential``'s
    own): a run log as the design posterior's check writes it (``target_id``,
    ``run_id``, ``status``, inputs, outputs), made the way that check makes it
    (:func:`simcalib.metamodel.posterior.check.predictive_check`: ``k`` draws picked
    at random from the chains, run ids 0..k-1, a stream per target), on streams of
    their own (``seq-posterior-ppc``).  A target without a netCDF has no runs."""
    from simcalib.metamodel.posterior.check import simulate_draws
    from simcalib.seeds import rng

    if k < 1:
        return pd.DataFrame()
    names = study.space.tunable_names
    tgt = targets.assign(target_id=targets["target_id"].astype(np.int64)).set_index(
        "target_id")
    pick = rng(seed, "seq-posterior-ppc", study.name)
    frames = []
    for tid in sorted({int(t) for t in target_ids}):
        path = Path(draws_dir) / f"target_{tid}.nc"
        if not path.is_file() or tid not in tgt.index:
            continue
        X = posterior_draws(path, names)
        X = X[pick.choice(len(X), size=k, replace=len(X) < k)]
        context = {c: float(tgt.at[tid, c]) for c in study.space.context_names}
        res = simulate_draws(study, X, names, context, seed, f"seq-posterior-ppc:{tid}",
                             threads)
        frames.append(res.assign(target_id=tid))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _band(Y: np.ndarray | None, band: Band, n: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, low, high) per column of ``Y``; NaN without rows."""
    if Y is None or not len(Y):
        nan = np.full(n, np.nan)
        return nan, nan, nan
    return (np.percentile(Y, 50, axis=0), np.percentile(Y, band.low, axis=0),
            np.percentile(Y, band.high, axis=0))


def _rec_values(rec: Mapping[str, Any], prefix: str, cols: Sequence[str]) -> np.ndarray:
    return np.array([float(rec.get(f"{prefix}{c}", np.nan)) for c in cols])


def curve_rows(rec: Mapping[str, Any], target: Mapping[str, Any], weights: pd.Series,
               groups: Mapping[str, list[tuple[str, float]]], Y: np.ndarray | None,
               band: Band, stochastic: bool, P: np.ndarray | None = None,
               post_from: str = "") -> list[dict[str, Any]]:
    """The table's rows of one target (module docstring); ``Y``: the replicates'
    outputs at the answer, columns in ``groups``' point order per series (None: not
    re-simulated); ``P``: the posterior predictive runs, the same columns (None: no
    posterior), drawn from the posterior ``post_from`` names."""
    rows: list[dict[str, Any]] = []
    col0 = 0
    for name, pts in groups.items():
        cols = [c for c, _ in pts]
        obs = np.array([float(target.get(c, np.nan)) for c in cols])
        sd = np.array([float(target.get(SD_PREFIX + c, np.nan)) for c in cols])
        w = weights.reindex(cols).to_numpy(dtype=float)
        seen = np.isfinite(obs) & (w > 0)
        ans = _rec_values(rec, "sim_", cols)
        z = np.where(seen, obs, 0.0)
        mis_ans = np.where(seen, w * np.abs(ans - z), 0.0)
        part = None if Y is None or not len(Y) else Y[:, col0:col0 + len(cols)]
        post = None if P is None or not len(P) else P[:, col0:col0 + len(cols)]
        col0 += len(cols)
        med, lo, hi = _band(part, band, len(cols))
        pmed, plo, phi = _band(post, band, len(cols))
        mis_res = (np.full(len(cols), np.nan) if part is None else
                   np.where(seen, w * np.abs(part - z).mean(axis=0), 0.0))
        pred = _rec_values(rec, "pred_", cols)
        for j, (_, t) in enumerate(pts):
            rows.append({"target_id": int(rec["target_id"]), "series": name, "point": t,
                         "observed": obs[j], "sd": sd[j], "weight": w[j],
                         "answer": ans[j], "predicted": pred[j], "resim_median": med[j],
                         "band_low": lo[j], "band_high": hi[j],
                         "replicates": 0 if part is None else len(part),
                         "band_percent_low": band.low, "band_percent_high": band.high,
                         "stochastic": bool(stochastic),
                         "post_median": pmed[j], "post_low": plo[j], "post_high": phi[j],
                         "post_runs": 0 if post is None else len(post),
                         "post_from": "" if post is None else post_from,
                         "misfit_answer": mis_ans[j], "misfit_resim": mis_res[j]})
    return rows


def curve_table(study: Study, records: pd.DataFrame, targets: pd.DataFrame,
                scale: np.ndarray, band: Band, seed: int, stochastic: bool | None,
                threads: int = 1, ppc_runs: pd.DataFrame | None = None,
                post_from: str = DESIGN_POSTERIOR) -> tuple[pd.DataFrame, bool | None]:
    """The long table of one strategy's records (module docstring) and whether the
    simulator behaved stochastically (None: no target could be re-simulated).  A
    target without an answer (failed) has no rows.  ``ppc_runs``: runs at posterior
    draws per target (a predictive check's run log), for the posterior predictive
    band; ``post_from``: which posterior drew them."""
    outputs = list(study.outputs)
    groups = series_point_columns(outputs)
    if not groups:
        raise ConfigError(f"{study.key}.series", "the study declares no series: no curve "
                          "to draw")
    missing = [c for c in ["target_id", *(c for g in groups.values() for c, _ in g)]
               if c not in targets.columns]
    if missing:
        raise DataError("targets", f"the targets table lacks column(s) {missing[:5]}")
    weights = point_weights(targets, outputs, scale)
    tgt = targets.assign(target_id=targets["target_id"].astype(np.int64)).set_index(
        "target_id", drop=False)
    point_cols = [c for g in groups.values() for c, _ in g]
    names = study.space.tunable_names
    post = posterior_runs(ppc_runs, point_cols)
    rows: list[dict[str, Any]] = []
    noisy: bool | None = None
    for rec in records.to_dict("records"):
        tid = int(rec["target_id"])
        x = np.array([float(rec.get(f"x_{n}", np.nan)) for n in names])
        if tid not in tgt.index or not np.isfinite(x).all():
            continue
        target = tgt.loc[tid].to_dict()
        ctx = {c: float(target[c]) for c in study.space.context_names}
        Y, got = replicates_at(study, x, ctx, tid, band.replicates, seed, point_cols,
                               stochastic if noisy is None else noisy, threads)
        noisy = got if noisy is None else noisy
        rows += curve_rows(rec, target, weights.loc[tid], groups, Y, band, got,
                           post.get(tid), post_from)
    return pd.DataFrame(rows, columns=COLUMNS), noisy


def series_misfit(table: pd.DataFrame) -> pd.DataFrame:
    """Per target and series: the weighted L1 misfit of the answer's curve and of the
    re-simulated curves (mean over the replicates), from the long table."""
    g = table.groupby(["target_id", "series"], sort=False)
    return pd.DataFrame({"misfit_answer": g["misfit_answer"].sum(min_count=1),
                         "misfit_resim": g["misfit_resim"].sum(min_count=1),
                         "replicates": g["replicates"].max()}).reset_index()


def band_sentence(table: pd.DataFrame) -> str:
    """One line saying what the band is, from the table itself."""
    if table.empty:
        return "No target has an answer to re-simulate."
    n = int(table["replicates"].max())
    lo, hi = float(table["band_percent_low"].iloc[0]), float(table["band_percent_high"].iloc[0])
    if not bool(table["stochastic"].astype(str).str.lower().eq("true").any()):
        line = ("Deterministic simulator: the dashed curve is the simulator re-run once at "
                "the answer (no band of re-runs: every run there gives the same curve).")
    else:
        line = (f"Band: {lo:g}-{hi:g} % of {n} fresh runs of the simulator at the answer "
                "(the re-scoring seeds), dashed line their median; solid line the answer's "
                "own run.")
    k = int(pd.to_numeric(table["post_runs"], errors="coerce").max()) if (
        "post_runs" in table and len(table)) else 0
    if k > 0:
        line += (f" Dotted band: {lo:g}-{hi:g} % of the simulator at {k} posterior draws "
                 f"of {posterior_name(table)} (its posterior predictive band).")
    return line


def posterior_name(table: pd.DataFrame) -> str:
    """Which posterior drew the table's posterior predictive band, in words (a table
    written before ``post_from`` existed: the design posterior, its only source then)."""
    if "post_from" not in table:
        return DESIGN_POSTERIOR
    got = [str(v) for v in table["post_from"].dropna().unique() if str(v)]
    return " and ".join(got) if got else DESIGN_POSTERIOR


__all__ = ["Band", "COLUMNS", "DESIGN_POSTERIOR", "SEQUENTIAL_POSTERIOR", "band_sentence",
           "curve_rows", "curve_table", "delta_scale", "point_weights", "posterior_draws",
           "posterior_name", "posterior_predictive_runs", "posterior_runs", "replicates_at",
           "series_point_columns", "series_misfit"]
