"""Posterior-predictive check with the real simulator: k posterior draws per target
are simulated (k runs per target, counted) and the observed outputs compared with them.

Why a range check: if the posterior and Sigma are right, the observed z_j and the k
replicated outputs S_j(x_i) (+ observation noise where the target has any) are
exchangeable, so z_j lies inside their range with probability exactly (k - 1)/(k + 1),
whatever the distribution (k = 9: 80 %).  Far less means the posterior is too narrow
or centred wrong (the metamodel's error is underestimated); far more, too wide.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.metamodel.posterior.sampler import Draws
from simcalib.seeds import rng
from simcalib.study.simulation import simulate_rows

log = logging.getLogger(__name__)


def simulate_draws(study: Any, X: np.ndarray, names: Sequence[str],
                   context: Mapping[str, float], seed: int,
                   stream: str, threads: int = 1) -> pd.DataFrame:
    """The simulator at posterior draws ``X`` (rows, tunables ``names``) of one target, its
    contexts (``{name: value}``) held: run ids 0..n-1 on ``stream``.  The one way a
    posterior's draws become runs, for the predictive check here and for the curves
    band of a posterior that ran none (:mod:`simcalib.report.curves`)."""
    df = pd.DataFrame(X, columns=list(names))
    for c, v in context.items():
        df[c] = v
    df = df[list(study.input_names)]
    df.insert(0, "run_id", np.arange(len(df), dtype=np.int64))
    return simulate_rows(study, df, seed, stream=stream, threads=threads)


def predictive_check(study: Any, draws: Draws, k: int, seed: int
                     ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Simulate ``k`` draws per target.  Returns (per target x output table, run log,
    summary with nominal and empirical coverage and the runs spent)."""
    post = draws.post
    outs = list(post.model.output_names)
    if k < 1:
        return pd.DataFrame(), pd.DataFrame(), {"ppc_draws": 0, "runs": 0}
    r = rng(seed, "posterior-ppc", study.name)
    rows, frames = [], []
    n_flat = draws.X.shape[0] * draws.X.shape[1]
    for t, spec in enumerate(post.targets):
        pick = r.choice(n_flat, size=k, replace=n_flat < k)
        res = simulate_draws(study, draws.flat(t)[pick], post.space.tunable_names,
                             spec.context, seed,
                             f"posterior-ppc:{spec.target_id}")
        ok = (res["status"] == "ok").to_numpy()
        Y = res[outs].to_numpy(dtype=float)
        # observation noise of the target (given sd or inferred tau) added to replicates
        var = spec.obs_var.copy()
        if draws.tau is not None and spec.infer_scale:
            tau = draws.tau[:, :, t].reshape(-1)[pick]
            Y = Y + r.standard_normal(Y.shape) * np.sqrt(
                var + (tau[:, None] * post.scale) ** 2 * spec.tau_mask())
        elif var.any():
            Y = Y + r.standard_normal(Y.shape) * np.sqrt(var)
        log_df = res.assign(target_id=spec.target_id)
        frames.append(log_df)
        Yok = Y[ok]
        for j, o in enumerate(outs):
            if spec.weight[j] == 0:   # not observed (a curve's point) or dropped
                continue
            if len(Yok) < 2:
                rows.append({"target_id": spec.target_id, "output": o, "observed": spec.z[j],
                             "sim_min": np.nan, "sim_max": np.nan, "rank": np.nan,
                             "inside": np.nan, "runs_ok": int(ok.sum())})
                continue
            v = Yok[:, j]
            rows.append({"target_id": spec.target_id, "output": o, "observed": spec.z[j],
                         "sim_min": float(v.min()), "sim_max": float(v.max()),
                         "rank": int((v < spec.z[j]).sum()),
                         "inside": bool(v.min() <= spec.z[j] <= v.max()),
                         "runs_ok": int(ok.sum())})
    table = pd.DataFrame(rows)
    runs = pd.concat(frames, ignore_index=True)
    inside = table["inside"].dropna().astype(bool)
    n_ok = int(table.drop_duplicates("target_id")["runs_ok"].min()) if len(table) else 0
    summary = {"ppc_draws": int(k), "runs": int(k * len(post.targets)),
               "failed_runs": int((runs["status"] != "ok").sum()),
               "nominal_coverage": (k - 1) / (k + 1) if k >= 2 else float("nan"),
               "empirical_coverage": float(inside.mean()) if len(inside) else float("nan"),
               "checked": int(len(inside)), "min_runs_ok": n_ok}
    log.info("%s predictive check: %d runs; observed outputs inside the range of %d "
             "replicates %.0f%% of the time (expected %.0f%%)", study.name, summary["runs"],
             k, 100 * summary["empirical_coverage"], 100 * summary["nominal_coverage"])
    return table, runs, summary
