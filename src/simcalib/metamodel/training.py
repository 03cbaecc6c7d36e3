"""Training the ReLU metamodel (:mod:`simcalib.metamodel.model`): split, scalers,
Adam with early stopping, the optional solvable phase, metrics and fine-tuning.

Why these choices:

* **Scalers fitted on the training split only** (no test leakage).
* **Early stopping** on the validation loss keeps the best weights, and the final
  metrics (``test_r2`` per output, ``test_mae`` in raw units) are computed on a test
  split the training never saw.
* **Seeds from** ``(seed, 'metamodel', study)``: split, weight init and minibatch
  order are reproducible, so a rerun gives the same network bit for bit.
* **Outputs that could fool the trust flag are named before fitting.**  A column
  whose magnitude would overflow float64 in the scaler or R² (> 1e150) is an error
  naming it and its size; an output constant over the design (sd 0, or below
  ``trust.CONSTANT_RTOL`` of its mean) is recorded as ``constant_outputs`` and left out
  of the R² judgement with a warning (its R² is 0/0; a constant once scored 0.98), and
  a design on which every output is constant is refused; a True/False output is
  trained as 1.0/0.0 with a warning and recorded as ``boolean_outputs`` (converted,
  not refused: a yes/no outcome is a legitimate thing to calibrate a rate against).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from simcalib import io
from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel import trust
from simcalib.metamodel.milp.boxbounds import metamodel_stability
from simcalib.metamodel.model import DTYPE, Metamodel, build_net, column_scale, r2_scores
from simcalib.metamodel.solvable import solvable_phase
from simcalib.progress import eta, every
from simcalib.seeds import int_seed, rng
from simcalib.study.simulation import failure_digest

log = logging.getLogger(__name__)

#: Defaults of the ``metamodel`` config section, from metamodel.schema.yaml (the one
#: source of truth); ``enabled`` is the workflow's switch, not a training setting.
DEFAULTS: dict[str, Any] = {k: v for k, v in schema_defaults("metamodel.schema.yaml").items()
                            if k != "enabled"}


def _cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` over the defaults; an unknown or mistyped key is an error (also from
    Python, where no config validation ran)."""
    check_section(cfg or {}, "metamodel.schema.yaml", "metamodel")
    out = copy.deepcopy(DEFAULTS)
    for k, v in (cfg or {}).items():
        out[k] = v
    return out



def _check_cfg(c: Mapping[str, Any]) -> None:
    split = c["split"]
    total = float(split["train"]) + float(split["val"]) + float(split["test"])
    if abs(total - 1.0) > 1e-6:
        raise ConfigError("metamodel.split", f"train + val + test must be 1, got {total:g}")
    if c["loss"] not in ("mse", "mae"):
        raise ConfigError("metamodel.loss", f"'mse' or 'mae', got {c['loss']!r}")
    if not 0.0 <= float(c["dropout"]) < 1.0:
        raise ConfigError("metamodel.dropout", "must lie in [0, 1)")
    if not c["hidden"] or any(int(w) < 1 for w in c["hidden"]):
        raise ConfigError("metamodel.hidden", "give at least one hidden width >= 1")


def _clean(df: pd.DataFrame, input_names: Sequence[str], output_names: Sequence[str],
           source: str) -> tuple[np.ndarray, np.ndarray]:
    missing = [c for c in [*input_names, *output_names] if c not in df.columns]
    if missing:
        raise DataError(source, f"missing column(s) {missing}")
    df = io.ok_rows(df)
    X = df[list(input_names)].to_numpy(dtype=float)
    Y = df[list(output_names)].to_numpy(dtype=float)
    good = np.isfinite(X).all(axis=1) & np.isfinite(Y).all(axis=1)
    return X[good], Y[good]


#: the largest magnitude a column may reach: its squares, summed over the rows in the
#: scaler's variance and in R², must stay below float64's 1.8e308
SCALE_LIMIT = 1e150


def check_scale(A: np.ndarray, names: Sequence[str], what: str, source: str) -> None:
    """A column whose magnitude would overflow float64 in the scaler (sd inf, test R²
    NaN, flagged only as "no test R² recorded") is an error naming it and its size."""
    if A.size == 0:
        return
    mag = np.abs(A).max(axis=0)
    for name, m in zip(names, mag, strict=True):
        if m > SCALE_LIMIT:
            raise DataError(source, f"{what} {name!r} reaches {m:.3g} in magnitude: its "
                            f"variance overflows float64 (limit ~{SCALE_LIMIT:.0e}) in the "
                            "metamodel's scaler and R²; rescale it (e.g. a derived output "
                            f"'{name} / 1e{int(np.log10(m))}' in simulator.derived_outputs, "
                            "or a unit in the simulator)")


def boolean_outputs(df: pd.DataFrame, output_names: Sequence[str]) -> list[str]:
    """Outputs the dataset holds as True/False: trained as 1.0/0.0, with a warning
    (a metamodel of a yes/no output predicts a number between, not a class)."""
    ok = io.ok_rows(df)
    out = []
    for o in output_names:
        col = ok[o].dropna() if o in ok else pd.Series(dtype=float)
        if pd.api.types.is_bool_dtype(col) or (
                len(col) and col.dtype == object
                and col.map(lambda v: isinstance(v, bool | np.bool_)
                            or str(v).strip() in ("True", "False")).all()):
            out.append(o)
    return out


def _output_facts(df: pd.DataFrame, X: np.ndarray, Y: np.ndarray,
                  input_names: Sequence[str], output_names: Sequence[str],
                  study: str) -> dict[str, Any]:
    """What training records and says about the outputs before it fits: scale checked,
    booleans and constants named (``boolean_outputs``, ``constant_outputs``)."""
    check_scale(X, input_names, "input", "dataset")
    check_scale(Y, output_names, "output", "dataset")
    facts: dict[str, Any] = {}
    flags = boolean_outputs(df, output_names)
    if flags:
        log.warning("%s: output(s) %s are True/False in the dataset: trained as 1.0/0.0 (the "
                    "metamodel predicts a number in between, and Delta counts |S - z| on "
                    "that scale); return a number if the output is not a yes/no",
                    study or "metamodel", flags)
        facts["boolean_outputs"] = flags
    const = trust.constant_outputs(Y, output_names)
    if const and len(const) == len(output_names):
        raise DataError("dataset", f"every output is constant over the design ({const}): no "
                        "input changes any output, so there is nothing to calibrate on; check "
                        "the simulator's outputs (or widen the parameter bounds)")
    if const:
        facts["constant_outputs"] = const
    return facts


def _loss_fn(name: str) -> nn.Module:
    return nn.L1Loss() if name == "mae" else nn.MSELoss()


def _fit(net: nn.Sequential, Xtr: torch.Tensor, Ytr: torch.Tensor, Xva: torch.Tensor | None,
         Yva: torch.Tensor | None, c: Mapping[str, Any], lr: float, epochs: int,
         gen: torch.Generator, early_stop: bool) -> dict[str, Any]:
    """Adam with minibatches; ReduceLROnPlateau and early stopping on the validation
    loss (best weights restored)."""
    loss_fn = _loss_fn(c["loss"])
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=float(c["weight_decay"]))
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, factor=float(c["lr_factor"]), patience=int(c["lr_patience"]),
        min_lr=float(c["min_lr"]))
    n = Xtr.shape[0]
    bs = max(1, min(int(c["batch_size"]), n))
    best, best_state, best_epoch, wait = np.inf, None, 0, 0
    epoch = 0
    t0, step = time.perf_counter(), every(int(epochs))
    for epoch in range(1, int(epochs) + 1):
        if epoch % step == 0 and Xva is not None:
            log.info("epoch %d/%d: best validation loss %.4g (epoch %d), %s", epoch,
                     int(epochs), best, best_epoch,
                     eta(time.perf_counter() - t0, epoch, int(epochs)))
        net.train()
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            loss = loss_fn(net(Xtr[idx]), Ytr[idx])
            loss.backward()
            opt.step()
        if Xva is None or Yva is None:
            continue
        net.eval()
        with torch.no_grad():
            val = float(loss_fn(net(Xva), Yva))
        sched.step(val)
        if val < best - 1e-12:
            best, best_state, best_epoch, wait = val, copy.deepcopy(net.state_dict()), epoch, 0
        else:
            wait += 1
            if early_stop and wait >= int(c["patience"]):
                break
    if best_state is not None:
        net.load_state_dict(best_state)
    net.eval()
    return {"epochs_run": epoch, "best_epoch": best_epoch,
            "val_loss": None if not np.isfinite(best) else float(best)}


def split(n: int, c: Mapping[str, Any], seed: int, study: str
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(test, validation, train) row indices of the usable rows, from (seed, study)."""
    perm = rng(seed, "metamodel", study, "split").permutation(n)
    n_te = max(1, int(round(float(c["split"]["test"]) * n)))
    n_va = max(1, int(round(float(c["split"]["val"]) * n)))
    return perm[:n_te], perm[n_te:n_te + n_va], perm[n_te + n_va:]


def heldout_rows(df: pd.DataFrame, mm: Metamodel, seed: int) -> pd.DataFrame:
    """The test rows ``mm`` never trained on, rebuilt from its dataset and seed (the
    posterior calibrates its error scale on them).  Raises DataError when the rows do
    not reproduce the recorded test R2 (another dataset or seed)."""
    c = _cfg(mm.info.get("config") or {})
    X, Y = _clean(df, mm.input_names, mm.output_names, "dataset")
    te, _, _ = split(len(X), c, seed, mm.study)
    r2 = r2_scores(Y[te], mm.predict(X[te]))
    rec = np.array([float((mm.info.get("test_r2") or {}).get(o, np.nan))
                    for o in mm.output_names])
    if not np.allclose(r2, rec, rtol=0, atol=1e-6):
        raise DataError("dataset", "its test split does not reproduce the metamodel's "
                        "recorded test R2 (another dataset or seed than it was trained on)")
    out = pd.DataFrame(np.hstack([X[te], Y[te]]),
                       columns=[*mm.input_names, *mm.output_names])
    return out


def train_metamodel(df: pd.DataFrame, input_names: Sequence[str], output_names: Sequence[str],
                    cfg: Mapping[str, Any], seed: int, study: str = "",
                    noise: Mapping[str, Any] | None = None) -> tuple[Metamodel, dict[str, Any]]:
    """Train a metamodel on the ``status == 'ok'`` rows of ``df``.

    Split, weight init and minibatch order all derive from ``(seed, 'metamodel',
    study)``, so a rerun gives the same network.  Returns the metamodel and its
    metrics (``test_r2`` and ``test_mae`` per output, ``val_loss``, epochs, seconds).

    ``noise``: the simulator's replicate noise (:mod:`simcalib.study.noise`, a dict
    with ``var`` per output); recorded as ``noise`` with each output's noise ceiling
    and explainable share on the test split, which the trust flag then judges
    (:mod:`simcalib.metamodel.trust`).

    Series outputs (``cases@7``): the network learns the series' basis weights and
    its last layer decodes them (:mod:`simcalib.metamodel.curves`)."""
    from simcalib.metamodel.curves import has_series

    if has_series(output_names):
        return _train_series(df, input_names, output_names, cfg, seed, study, noise)
    c = _cfg(cfg)
    _check_cfg(c)
    X, Y = _clean(df, input_names, output_names, "dataset")
    n = len(X)
    if n < 10:
        raise DataError("dataset", f"only {n} usable rows (status ok, finite); need >= 10 "
                        f"({failure_digest(df)})")
    facts = _output_facts(df, X, Y, input_names, output_names, study)
    te, va, tr = split(n, c, seed, study)
    x_mean, x_std = column_scale(X[tr])
    y_mean, y_std = column_scale(Y[tr])

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=DTYPE)

    Xs, Ys = (X - x_mean) / x_std, (Y - y_mean) / y_std
    threads = int(c.get("threads") or 0)
    old_threads = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int_seed(seed, "metamodel", study, "init"))
            net = build_net(len(input_names), c["hidden"], len(output_names),
                            float(c["dropout"]))
            gen = torch.Generator().manual_seed(int_seed(seed, "metamodel", study, "batches"))
            fit = _fit(net, t(Xs[tr]), t(Ys[tr]), t(Xs[va]), t(Ys[va]), c, float(c["lr"]),
                       int(c["epochs"]), gen, early_stop=True)
        net.eval()
        solv = solvable_phase(net, c, Xs, Ys, tr, va, te, Y, y_mean, y_std, seed, study)
    finally:
        torch.set_num_threads(old_threads)
    seconds = time.perf_counter() - t0
    net.eval()
    with torch.no_grad():
        P = net(t(Xs[te])).numpy() * y_std + y_mean
    r2 = r2_scores(Y[te], P)
    mae = np.abs(Y[te] - P).mean(axis=0)
    # second moment of the held-out residuals (bias included): the metamodel-error
    # covariance of the posterior's likelihood (simcalib.metamodel.posterior.noise)
    resid = Y[te] - P
    resid_cov = resid.T @ resid / max(1, len(te))
    min_r2 = float(c["min_r2"])
    r2_by = dict(zip(output_names, r2.tolist(), strict=True))
    noise_rec = noise_record(noise, Y[te], output_names, r2_by) if noise else None
    verdict = trust.judge({"test_r2": r2_by, "min_r2": min_r2, **facts,
                           **({"noise": noise_rec} if noise_rec else {})})
    low = verdict.weak_outputs
    _log_verdict(verdict, study or "metamodel")
    metrics: dict[str, Any] = {
        "test_r2": {o: float(v) for o, v in zip(output_names, r2, strict=True)},
        "test_mae": {o: float(v) for o, v in zip(output_names, mae, strict=True)},
        "test_residual_cov": resid_cov.tolist(),
        # NaN-propagating minimum over the outputs judged on R² (constants left out)
        "min_test_r2": float(np.min([v for o, v in r2_by.items() if o not in verdict.constant])),
        "n_train": int(len(tr)), "n_val": int(len(va)), "n_test": int(len(te)),
        "min_r2": min_r2,
        "r2_ok": not low,
        "low_r2_outputs": low,
        "train_seconds": round(seconds, 3),
        **fit,
        **facts,
    }
    if noise_rec is not None:
        metrics["noise"] = noise_rec
    if solv is not None:
        plain = np.array(solv["plain_test_r2"])
        solv["plain_test_r2"] = {o: float(v) for o, v in zip(output_names, plain, strict=True)}
        solv["plain_test_r2_min"] = float(plain.min())
        solv["test_r2_max_drop"] = float(np.max(plain - r2))
        metrics["solvable"] = solv
    info = {
        "study": study,
        "input_bounds": {nm: [float(X[:, i].min()), float(X[:, i].max())]
                         for i, nm in enumerate(input_names)},
        "config": {k: c[k] for k in sorted(c)},
        **metrics,
    }
    mm = Metamodel(net, input_names, output_names, x_mean, x_std, y_mean, y_std, info)
    mm.info["stability"] = metrics["stability"] = metamodel_stability(mm)
    log.info("%s: trained %s in %.1f s (%d epochs); min test R2 %.4f", study or "metamodel",
             c["hidden"], seconds, fit["epochs_run"], r2.min())
    return mm, metrics


def _train_series(df: pd.DataFrame, input_names: Sequence[str], output_names: Sequence[str],
                  cfg: Mapping[str, Any], seed: int, study: str,
                  noise: Mapping[str, Any] | None) -> tuple[Metamodel, dict[str, Any]]:
    """:func:`train_metamodel` on the scalars and the series' basis weights (bases
    fitted on the training split), folded into a metamodel of every output; metrics
    and the trust verdict on the reconstructed curves."""
    from simcalib.metamodel import curves, levelnoise

    c = _cfg(cfg)
    _check_cfg(c)
    X, Y = _clean(df, input_names, output_names, "dataset")
    if len(X) < 10:
        raise DataError("dataset", f"only {len(X)} usable rows (status ok, finite); need "
                        f">= 10 ({failure_digest(df)})")
    te, _, tr = split(len(X), c, seed, study)
    bases = curves.fit_bases(Y, output_names, tr, c, noise)
    reduced, names = curves.reduced_frame(X, Y, input_names, output_names, bases)
    level = log.level  # the inner network's own verdict is on weights: not shown
    log.setLevel(logging.ERROR)
    try:
        inner, inner_metrics = train_metamodel(reduced, input_names, names, cfg, seed, study)
    finally:
        log.setLevel(level)
    P = curves.fold(inner, output_names, bases, {}).predict(X[te])
    r2 = r2_scores(Y[te], P)
    resid = Y[te] - P
    level = levelnoise.fit(resid, P, output_names)
    series = curves.series_record(bases, output_names, Y[te], P, inner_metrics["test_r2"],
                                  noise)
    r2_by = dict(zip(output_names, r2.tolist(), strict=True))
    noise_rec = None
    if noise:
        noise_rec = noise_record({k: v for k, v in noise.items() if k != "series_diff"},
                                 Y[te], output_names, r2_by)
    facts = {k: inner_metrics[k] for k in ("boolean_outputs", "constant_outputs")
             if k in inner_metrics}
    judged = {"test_r2": r2_by, "min_r2": float(c["min_r2"]), "series": series, **facts,
              **({"noise": noise_rec} if noise_rec else {})}
    verdict = trust.judge(judged)
    _log_verdict(verdict, study or "metamodel")
    log.info(verdict.basis_note(study or "metamodel"))
    keep = ("n_train", "n_val", "n_test", "train_seconds", "epochs_run", "best_epoch",
            "val_loss", "solvable", "stability")
    metrics: dict[str, Any] = {
        "test_r2": r2_by,
        "test_mae": dict(zip(output_names, np.abs(resid).mean(axis=0).tolist(), strict=True)),
        "test_residual_cov": (resid.T @ resid / max(1, len(te))).tolist(),
        # how the held-out error grows with a curve's level (the posterior's ``scaled``
        # error model, simcalib.metamodel.levelnoise) and the covariance without it
        "level_noise": level,
        "test_residual_cov_level_free": levelnoise.level_free(resid, P, output_names,
                                                              level).tolist(),
        "min_test_r2": verdict.min_test_r2, "min_r2": float(c["min_r2"]),
        "r2_ok": verdict.ok, "low_r2_outputs": verdict.weak_outputs, "series": series,
        **{k: inner_metrics[k] for k in keep if k in inner_metrics}, **facts}
    if noise_rec is not None:
        metrics["noise"] = noise_rec
    info = {"study": study, "input_bounds": inner.info["input_bounds"],
            "config": inner.info["config"], **metrics}
    mm = curves.fold(inner, output_names, bases, info)
    log.info("%s: series metamodel: %s", study or "metamodel", ", ".join(
        f"{n} {r['components']} components of {r['points']} points, curve test R2 "
        f"{r['test_r2']:.4f}, basis held-out error {r['basis_cv_relative']:.3g} of its scale"
        for n, r in series.items()))
    return mm, metrics


def _log_verdict(verdict: trust.MetamodelTrust, subject: str) -> None:
    """The trust verdict in the training log: a warning when not trusted, the notes on
    noise and constant outputs otherwise."""
    if not verdict.ok:
        log.warning(verdict.warning(subject))
        if verdict.constant:
            log.warning(verdict.constant_note(subject))
        return
    for line in dict.fromkeys([verdict.note(subject), verdict.constant_note(subject)]):
        if line:
            log.info(line) if "constant" not in line else log.warning(line)


def noise_record(noise: Mapping[str, Any], Y_test: np.ndarray, output_names: Sequence[str],
                 test_r2: Mapping[str, float]) -> dict[str, Any]:
    """The ``noise`` entry of metamodel.json: the estimate as given, plus per output
    the test split's total variance (the denominator of its R²), the noise ceiling
    1 - noise var / total var and the explainable share R² / ceiling."""
    total = dict(zip(output_names, np.var(Y_test, axis=0).tolist(), strict=True))
    var = {o: float((noise.get("var") or {}).get(o, 0.0)) for o in output_names}
    ceiling = trust.noise_ceiling(var, total)
    rec = {k: v for k, v in noise.items() if k != "var"}
    rec.update({"var": var, "total_var": total, "ceiling": ceiling,
                "explainable_share": trust.explainable_share(test_r2, ceiling)})
    return rec


def fine_tune(mm: Metamodel, df_new: pd.DataFrame, cfg: Mapping[str, Any], seed: int,
              epochs: int | None = None) -> Metamodel:
    """Continue training a copy of ``mm`` on new rows (the adaptive strategy's
    simulations), keeping the scalers fixed so the MILP scaling and earlier targets
    stay meaningful.  Uses ``fine_tune_lr`` and ``fine_tune_epochs`` (or ``epochs``);
    no early stopping (the new data are usually too few to split)."""
    c = _cfg(cfg)
    X, Y = _clean(df_new, mm.input_names, mm.output_names, "fine-tune data")
    new = copy.deepcopy(mm)
    if len(X) == 0:
        return new
    Xs = torch.as_tensor((X - mm.x_mean) / mm.x_std, dtype=DTYPE)
    Ys = torch.as_tensor(mm.scale_outputs(Y), dtype=DTYPE)
    n_ep = int(epochs if epochs is not None else c["fine_tune_epochs"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int_seed(seed, "fine_tune"))
        gen = torch.Generator().manual_seed(int_seed(seed, "fine_tune", "batches"))
        _fit(new.net, Xs, Ys, None, None, c, float(c["fine_tune_lr"]), n_ep, gen,
             early_stop=False)
    new.net.eval()
    new.info["fine_tuned_rows"] = int(new.info.get("fine_tuned_rows", 0)) + len(X)
    return new
