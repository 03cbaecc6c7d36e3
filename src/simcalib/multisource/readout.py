"""Reading results out of fitted networks: theta-hat samples and summaries,
predictions, RRMSE and the latent maps.

RRMSE = sqrt(MSE / var(y_test)) per output column (missing values ignored); for a
vector output group it is sqrt(sum of the columns' MSE / sum of their variances).
Over several seeds, theta-hat is summarised from the pooled samples of all seeds
(the mixture), and predictions are the seed average of the predictive means.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from simcalib.multisource.problem import ProblemSpec
from simcalib.multisource.tensors import to_rows
from simcalib.multisource.training import FitResult


def theta_samples(res: FitResult, n: int, gen: torch.Generator) -> pd.DataFrame:
    """Draws of theta-hat (original units) for every low-fidelity source."""
    m, spec, names = res.model, res.spec, res.spec.theta_names
    frames = []
    with torch.no_grad():
        for i, s in enumerate(spec.sources):
            if s.hf:
                continue
            src = torch.full((n,), i, dtype=torch.long)
            eps = torch.randn((n, len(names)), generator=gen)
            th = res.scaling.theta_from_scaled(m.sample_theta(src, eps).numpy())
            for t in s.theta:
                frames.append(pd.DataFrame({"seed": res.seed, "source": s.name, "parameter": t,
                                            "draw": np.arange(n), "value": th[:, names.index(t)]}))
    return pd.concat(frames, ignore_index=True)


def distribution_params(res: FitResult) -> pd.DataFrame:
    """The learned normal before the clamp, in original units, per source and slot."""
    m, spec, names, sc = res.model, res.spec, res.spec.theta_names, res.scaling
    mu = m.theta_mu.detach().numpy()
    sd = m.theta_sd().detach().numpy()
    rows = []
    for i, s in enumerate(spec.sources):
        for t in s.theta:
            k = names.index(t)
            fixed = bool(m.fixed_mask[i, k])
            rows.append({"seed": res.seed, "source": s.name, "parameter": t,
                         "mu_raw": float(mu[i, k] * sc.th_sd[k] + sc.th_mean[k]),
                         "sd_raw": 0.0 if fixed else float(sd[i, k] * sc.th_sd[k]),
                         "fixed": fixed})
    return pd.DataFrame(rows)


def theta_summary(samples: pd.DataFrame, params: pd.DataFrame, seconds: list[float],
                  theta_mse: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """One row per (source, parameter): pooled mean, sd and 95% interval of theta-hat,
    the spread of the per-seed means, theta^MSE and whether the interval covers it."""
    rows = []
    for (src, par), g in samples.groupby(["source", "parameter"], sort=False):
        v = g["value"].to_numpy()
        seed_means = g.groupby("seed")["value"].mean()
        p = params[(params["source"] == src) & (params["parameter"] == par)]
        ref = (theta_mse or {}).get(src, {}).get(par, np.nan)
        lo, hi = np.quantile(v, [0.025, 0.975])
        rows.append({"source": src, "parameter": par, "mean": v.mean(), "sd": v.std(ddof=1),
                     "lower95": lo, "upper95": hi, "theta_mse": ref,
                     "covered": bool(lo <= ref <= hi) if np.isfinite(ref) else np.nan,
                     "abs_error": abs(v.mean() - ref) if np.isfinite(ref) else np.nan,
                     "seed_mean_sd": seed_means.std(ddof=1) if len(seed_means) > 1 else 0.0,
                     "mu_raw": p["mu_raw"].mean(), "sd_raw": p["sd_raw"].mean(),
                     "fixed": bool(p["fixed"].any()), "n_seeds": int(seed_means.size),
                     "fit_seconds": float(np.mean(seconds))})
    return pd.DataFrame(rows)


def predict(res: FitResult, df: pd.DataFrame, as_source: str, theta: str = "data",
            n_draws: int = 64, gen: torch.Generator | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and sd (original units) of every row of ``df`` with ``t_s`` set
    to ``as_source``.  ``theta='data'`` feeds the rows' own parameter columns (HF
    emulation ignores them anyway); ``theta='calibrated'`` averages over ``n_draws``
    draws of that source's theta-hat (mean of means; variance adds the spread)."""
    spec, sc, m = res.spec, res.scaling, res.model
    idx = [s.name for s in spec.sources].index(as_source)
    d = df.copy()
    d["source"] = as_source
    rows = to_rows(d, spec, sc)
    src = torch.full((len(d),), idx, dtype=torch.long)
    gen = gen or torch.Generator().manual_seed(0)
    with torch.no_grad():
        if theta == "data":
            mus, sds = m.predict(src, rows.x, rows.theta, rows.cat)
            mu, var = mus.numpy(), sds.numpy() ** 2
        else:
            draws = []
            for _ in range(n_draws):
                eps = torch.randn(rows.theta.shape, generator=gen)
                th = m.sample_theta(src, eps)
                mus, sds = m.predict(src, rows.x, th, rows.cat)
                draws.append((mus.numpy(), sds.numpy() ** 2))
            mu = np.mean([a for a, _ in draws], axis=0)
            var = np.mean([b for _, b in draws], axis=0) + np.var([a for a, _ in draws], axis=0)
    return sc.y_from_scaled(mu), sc.y_from_scaled(np.sqrt(var), sd=True)


def rrmse(y: np.ndarray, yhat: np.ndarray) -> float:
    """sqrt(sum MSE / sum var(y)) over the columns of y (one column: the usual
    RRMSE); rows with missing y are ignored column by column."""
    y, yhat = np.atleast_2d(y.T).T, np.atleast_2d(yhat.T).T
    mse = var = 0.0
    for c in range(y.shape[1]):
        ok = np.isfinite(y[:, c])
        mse += float(np.mean((y[ok, c] - yhat[ok, c]) ** 2))
        var += float(np.var(y[ok, c]))
    return float(np.sqrt(mse / var)) if var > 0 else float("nan")


def rrmse_table(results: list[FitResult], test: pd.DataFrame, spec: ProblemSpec,
                predictors: list[str], theta_for: dict[str, str]) -> pd.DataFrame:
    """RRMSE of the HF test outputs per output group and predictor (t_s value).  The
    ensemble row uses the seed-averaged predictive mean; per-seed values are
    summarised as mean and sd.  If ``true_<col>`` columns exist, the error against
    the noise-free truth is reported too."""
    hf = test[test["source"] == spec.hf.name].reset_index(drop=True)
    out = []
    for pred in predictors:
        means = [predict(r, hf, pred, theta_for.get(pred, "data"))[0] for r in results]
        ens = np.mean(means, axis=0)
        for group, cols in spec.outputs.items():
            ci = [spec.y_cols.index(c) for c in cols]
            y = hf[cols].to_numpy(float)
            per_seed = [rrmse(y, mm[:, ci]) for mm in means]
            row = {"predictor": pred, "output": group, "rrmse": rrmse(y, ens[:, ci]),
                   "rrmse_seed_mean": float(np.mean(per_seed)),
                   "rrmse_seed_sd": float(np.std(per_seed, ddof=1)) if len(per_seed) > 1
                   else 0.0}
            true_cols = [f"true_{c}" for c in cols]
            if all(c in hf.columns for c in true_cols):
                row["rrmse_noisefree"] = rrmse(hf[true_cols].to_numpy(float), ens[:, ci])
            out.append(row)
    return pd.DataFrame(out)


def latent_maps(res: FitResult, train: pd.DataFrame, n: int, gen: torch.Generator
                ) -> pd.DataFrame:
    """z^s of every source; z^theta of every LF source for its prior (training-data
    parameters) and posterior (theta-hat draws); z^theta of the HF source."""
    spec, m, sc = res.spec, res.model, res.scaling
    rows = []
    K = len(spec.theta_names)
    with torch.no_grad():
        src_all = torch.arange(len(spec.sources))
        zs, _, _ = m.latents(src_all, torch.zeros(len(spec.sources), K),
                             torch.zeros(len(spec.sources), max(1, len(sc.cat_levels))))
        for i, s in enumerate(spec.sources):
            rows.append({"seed": res.seed, "block": "z_s", "source": s.name, "set": "source",
                         "z1": float(zs[i, 0]), "z2": float(zs[i, 1 % zs.shape[1]])})
        for i, s in enumerate(spec.sources):
            src = torch.full((n,), i, dtype=torch.long)
            cat = torch.zeros(n, max(1, len(sc.cat_levels)))
            sets = {}
            if s.hf:
                sets["hf"] = torch.randn((n, K), generator=gen)   # dummies: masked out
            else:
                d = train[train["source"] == s.name]
                th = to_rows(d, spec, sc).theta
                pick = torch.randint(len(d), (n,), generator=gen)
                sets["prior"] = th[pick]
                sets["posterior"] = m.sample_theta(src, torch.randn((n, K), generator=gen))
            for name, th in sets.items():
                _, zt, _ = m.latents(src, th, cat)
                rows += [{"seed": res.seed, "block": "z_theta", "source": s.name, "set": name,
                          "z1": float(a), "z2": float(b)}
                         for a, b in zt[:, :2].numpy().reshape(-1, 2)]
    return pd.DataFrame(rows)
