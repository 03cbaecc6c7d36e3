"""Fitting iPro-NC: one seed at a time, full-batch or mini-batch, with validation.

Adam with two parameter groups: the network weights carry weight decay, the
calibration distributions (theta-hat means and sds) do not (paper §3.2).  The
validation loss (same loss, validation rows, a fixed noise draw) is computed every
``val_every`` epochs; ``restore_best`` returns the state with the lowest one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from simcalib.config import schema_defaults
from simcalib.errors import ConfigError
from simcalib.multisource.loss import ipronc_loss
from simcalib.multisource.model import IProNC
from simcalib.multisource.problem import ProblemSpec
from simcalib.multisource.tensors import Batch, Scaling, make_batch, slot_mask, to_rows
from simcalib.progress import eta

log = logging.getLogger(__name__)


#: multisource.fit's defaults, read from multisource.schema.yaml: the one source of
#: defaults, so a fit started from Python trains what a config would.
_D: dict[str, Any] = schema_defaults("multisource.schema.yaml")["fit"]


@dataclass(frozen=True)
class FitSettings:
    """iPro-NC training settings (``multisource.fit``; the schema documents each),
    frozen: built once where a command receives them (:meth:`from_dict`)."""

    epochs: int = _D["epochs"]
    lr: float = _D["lr"]
    lr_theta: float | None = _D["lr_theta"]
    lr_schedule: str = _D["lr_schedule"]
    weight_decay: float = _D["weight_decay"]
    batch_size: int | None = _D["batch_size"]
    beta_is: float = _D["beta_is"]
    beta_kl: float = _D["beta_kl"]
    beta_nll: float = _D["beta_nll"]
    sigma_p: float = _D["sigma_p"]
    kl: str = _D["kl"]
    phi: float = _D["phi"]
    theta_sd_init: float = _D["theta_sd_init"]
    block0: list[int] = field(default_factory=lambda: list(_D["block0"]))
    block1: list[int] = field(default_factory=lambda: list(_D["block1"]))
    block2: list[int] = field(default_factory=lambda: list(_D["block2"]))
    block3: list[int] = field(default_factory=lambda: list(_D["block3"]))
    latent: int = _D["latent"]
    activation: str = _D["activation"]
    sd_floor: float = _D["sd_floor"]
    val_every: int = _D["val_every"]
    restore_best: bool = _D["restore_best"]
    log_every: int = _D["log_every"]
    n_seeds: int = _D["n_seeds"]
    n_posterior: int = _D["n_posterior"]

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "fit") -> FitSettings:
        d = dict(d or {})
        known = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise ConfigError(f"{where}.{extra[0]}", f"unknown key(s) {extra}; "
                                                     f"allowed {sorted(known)}")
        s = cls(**d)
        for key in ("epochs", "n_seeds", "latent", "n_posterior", "val_every", "log_every"):
            if int(getattr(s, key)) < 1:
                raise ConfigError(f"{where}.{key}", "must be >= 1")
        for key in ("lr", "sigma_p", "theta_sd_init", "phi", "sd_floor"):
            if not float(getattr(s, key)) > 0:
                raise ConfigError(f"{where}.{key}", "must be > 0")
        if s.lr_schedule not in ("constant", "cosine"):
            raise ConfigError(f"{where}.lr_schedule",
                              f"{s.lr_schedule!r} is not one of ['constant', 'cosine']")
        if s.kl not in ("paper", "gaussian"):
            raise ConfigError(f"{where}.kl", f"{s.kl!r} is not one of ['paper', 'gaussian']")
        if s.batch_size is not None and s.batch_size < 1:
            s = dataclasses.replace(s, batch_size=None)
        return s


@dataclass
class FitResult:
    model: IProNC
    scaling: Scaling
    spec: ProblemSpec
    seed: int
    seconds: float
    history: list[dict[str, float]]
    best_epoch: int
    cpu_seconds: float = float("nan")


def build_model(train: pd.DataFrame, spec: ProblemSpec, scaling: Scaling, st: FitSettings,
                fixed: dict[str, dict[str, float]] | None = None) -> IProNC:
    """Model with calibration distributions initialised at each source's data mean and
    clamped into its training range (all in the scaled parameter space)."""
    mask = slot_mask(spec)
    S, K = mask.shape
    lo, hi, init = np.zeros((S, K)), np.zeros((S, K)), np.zeros((S, K))
    fmask, fval = np.zeros((S, K), bool), np.full((S, K), np.nan)
    names = spec.theta_names
    for i, s in enumerate(spec.sources):
        if s.hf:
            continue
        rows = train[train["source"] == s.name]
        th = scaling.theta_to_scaled(rows[names].to_numpy(float))
        for t in s.theta:
            k = names.index(t)
            col = th[:, k][np.isfinite(th[:, k])]
            lo[i, k], hi[i, k], init[i, k] = col.min(), col.max(), col.mean()
        for t, v in (fixed or {}).get(s.name, {}).items():
            if t not in s.theta:
                raise ConfigError(f"fixed.{s.name}.{t}",
                                  f"source '{s.name}' has no parameter '{t}' ({s.theta})")
            k = names.index(t)
            fmask[i, k] = True
            raw = np.zeros(K)
            raw[k] = float(v)
            fval[i, k] = scaling.theta_to_scaled(raw)[k]
    return IProNC(n_sources=S, n_x=len(spec.x), n_cat=max(1, len(scaling.cat_levels)),
                  n_y=len(spec.y_cols), slot_mask=mask, lo=lo, hi=hi, theta_init=init,
                  sd_init=st.theta_sd_init, fixed_mask=fmask, fixed_value=fval,
                  block0=st.block0, block1=st.block1, block2=st.block2, block3=st.block3,
                  latent=st.latent, activation=st.activation, sd_floor=st.sd_floor)


def batch_loss(model: IProNC, batch: Batch, eps: torch.Tensor, st: FitSettings
               ) -> dict[str, torch.Tensor]:
    mu, sd = model(batch, eps)
    learned = model.learned_mask()
    return ipronc_loss(batch.y, mu, sd, batch.w, batch.is_cal, model.theta_sd()[learned],
                       beta_is=st.beta_is, beta_kl=st.beta_kl, sigma_p=st.sigma_p,
                       phi=st.phi, kl_form=st.kl, beta_nll=st.beta_nll)


@dataclass
class _Run:
    """One fit's state between its stages (:func:`fit_one`)."""

    model: IProNC
    opt: torch.optim.Optimizer
    sched: Any
    rows: Any
    full: Batch
    n_sources: int
    lf_index: list[int]
    gen: torch.Generator
    vbatch: Batch | None = None
    veps: torch.Tensor | None = None
    history: list[dict[str, float]] = field(default_factory=list)
    best: tuple[float, int, Any] = (float("inf"), 0, None)


def _optimizer(model: IProNC, st: FitSettings) -> tuple[torch.optim.Optimizer, Any]:
    """Adam over the network (weight decay) and the calibration parameters (none).
    cosine: every group's rate falls from its own value to 1 % of it by the last
    epoch; the heteroscedastic NLL oscillates at a constant 1e-2 on larger problems
    (the hardening study), and a decaying rate lets it settle before the run ends."""
    opt = torch.optim.Adam([
        {"params": model.network_parameters(), "weight_decay": st.weight_decay},
        {"params": model.calibration_parameters(), "weight_decay": 0.0,
         "lr": st.lr_theta or st.lr},
    ], lr=st.lr)
    sched = (torch.optim.lr_scheduler.LambdaLR(
        opt, lambda e: 0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * min(e, st.epochs)
                                                               / st.epochs)))
             if st.lr_schedule == "cosine" else None)
    return opt, sched


def _setup(train: pd.DataFrame, val: pd.DataFrame | None, spec: ProblemSpec, st: FitSettings,
           seed: int, fixed: dict[str, dict[str, float]] | None) -> tuple[_Run, Scaling]:
    """Seeds, scaling, model, optimiser and the (validation) batches."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    scaling = Scaling.fit(train, spec)
    model = build_model(train, spec, scaling, st, fixed)
    S = len(spec.sources)
    lf_index = [i for i, s in enumerate(spec.sources) if not s.hf]
    rows = to_rows(train, spec, scaling)
    opt, sched = _optimizer(model, st)
    run = _Run(model, opt, sched, rows, make_batch(rows, S, lf_index), S, lf_index, gen)
    if val is not None and len(val):
        run.vbatch = make_batch(to_rows(val, spec, scaling), S, lf_index)
        run.veps = torch.randn(run.vbatch.theta.shape,
                               generator=torch.Generator().manual_seed(seed + 2))
    return run, scaling


def _epoch(run: _Run, st: FitSettings) -> dict[str, torch.Tensor]:
    """One pass over the rows (full batch, or shuffled mini-batches); the last
    batch's loss terms."""
    run.model.train()
    n = len(run.rows)
    if st.batch_size is None or st.batch_size >= n:
        batches = [run.full]
    else:
        perm = torch.randperm(n, generator=run.gen)
        batches = [make_batch(run.rows.take(perm[i:i + st.batch_size]), run.n_sources,
                              run.lf_index) for i in range(0, n, st.batch_size)]
    for b in batches:
        eps = torch.randn(b.theta.shape, generator=run.gen)
        terms = batch_loss(run.model, b, eps, st)
        run.opt.zero_grad(set_to_none=True)
        terms["total"].backward()
        run.opt.step()
    if run.sched is not None:
        run.sched.step()
    return terms


def _record(run: _Run, st: FitSettings, epoch: int, terms: dict[str, torch.Tensor]) -> None:
    """The history row of a validation epoch (train and validation losses); the best
    validation state is kept when ``restore_best``."""
    rec = {"epoch": epoch, **{f"train_{k}": float(v.detach()) for k, v in terms.items()}}
    if run.vbatch is not None:
        run.model.eval()
        with torch.no_grad():
            vt = batch_loss(run.model, run.vbatch, run.veps, st)
        rec.update({f"val_{k}": float(v) for k, v in vt.items()})
        if rec["val_total"] < run.best[0]:
            state = ({k: v.clone() for k, v in run.model.state_dict().items()}
                     if st.restore_best else None)
            run.best = (rec["val_total"], epoch, state)
    run.history.append(rec)


def _progress(run: _Run, st: FitSettings, epoch: int, terms: dict[str, torch.Tensor],
              label: str, t0: float) -> None:
    h = run.history
    val = (f" val {h[-1]['val_total']:.4f}" if run.vbatch is not None and h
           and h[-1]["epoch"] == epoch else "")
    log.info("%s epoch %d/%d loss %.4f%s, %s", label, epoch, st.epochs,
             float(terms["total"].detach()), val, eta(time.perf_counter() - t0, epoch, st.epochs))


def fit_one(train: pd.DataFrame, val: pd.DataFrame | None, spec: ProblemSpec,
            st: FitSettings, seed: int, fixed: dict[str, dict[str, float]] | None = None,
            label: str = "") -> FitResult:
    """Train one network from ``seed`` (an int from :func:`simcalib.seeds.int_seed`).
    Stages: set up -> epochs (a validation record every ``val_every``, a progress line
    every ``log_every``) -> the best state restored when ``restore_best``."""
    if not spec.sources[0].hf:
        spec = spec.subset([s.name for s in spec.sources])     # puts HF first
    run, scaling = _setup(train, val, spec, st, seed, fixed)
    t0, c0 = time.perf_counter(), time.process_time()
    for epoch in range(1, st.epochs + 1):
        terms = _epoch(run, st)
        if not torch.isfinite(terms["total"]):
            raise FloatingPointError(f"{label}: loss is not finite at epoch {epoch}")
        if epoch % st.val_every == 0 or epoch == st.epochs:
            _record(run, st, epoch, terms)
        if epoch % st.log_every == 0 or epoch == st.epochs:
            _progress(run, st, epoch, terms, label, t0)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    best_epoch = st.epochs
    if st.restore_best and run.best[2] is not None:
        run.model.load_state_dict(run.best[2])
        best_epoch = run.best[1] or st.epochs
    run.model.eval()
    return FitResult(run.model, scaling, spec, seed, seconds, run.history, best_epoch, cpu)
