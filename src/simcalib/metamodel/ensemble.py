"""An ensemble of M small ReLU nets: a mean prediction, the members' spread, and
MILP-representable members and mean.

Why an ensemble: one net trained on a few dozen runs is confidently wrong away from
them; M nets trained on bootstrap resamples (and from different seeds) disagree
exactly where the data are thin.  The ``sequential`` strategy samples one member per
proposal (Thompson sampling through the exact MILP: each member is a plausible
simulator, and its optimum a plausible location of the target's), and the
posterior may use the members' spread as metamodel error.

Every member and the mean are :class:`~simcalib.metamodel.model.Metamodel` objects of
the usual shape, so the existing MILP (:mod:`simcalib.metamodel.milp`) optimises
them unchanged: a member is a net; the mean of M nets is one wider net
(:func:`simcalib.metamodel.stacking.mean_of`).  All members share one pair of
scalers, fitted on the first data they saw and kept for the ensemble's life, so a
warm start (:func:`fit_ensemble` with ``warm=``) continues from weights that still
mean the same thing.

Training: Adam on the mean squared error of standardised outputs, full batch (the
data sets here are small), early stopping on each member's out-of-bag rows (best
weights restored).  Seeds from ``(seed, 'ensemble', tag, member)``: the same call
gives the same ensemble bit for bit.  ``info['oob_r2']`` is the out-of-bag R^2 per
output (each row predicted by the members that did not train on it): the held-out
quality of an ensemble that has no test split.

Series outputs (issue 42; output columns ``<series>@<point>``): the members are trained
on each series' basis weights, not on its points, exactly as the design's metamodel is
(:mod:`simcalib.metamodel.curves`): a basis is fitted to the curves of the rows given
(every fit: ``sequential`` refits it each round, so it follows the runs as they gather
where the target is), its components chosen by explained variance
(``metamodel.series``), and each member's decode is folded into its last layer.  So a
member, the mean and every prediction are over the points again (``y_mean``/``y_std``
of a point: the basis mean and the series' one scale) and the proposal MILP's misfit
stays exact at every observed point.  A series' weights share one divisor (the root
of their summed variances), so the training loss is the curve's squared error in the
series' scale.  Why not one output per point: 30-100 points of one curve are a handful
of degrees of freedom.  Measured on the stochastic epidemic's 40-point case curve
(benchmarks/curve_ensemble_fit.py, default ensemble settings, 256 fresh test runs,
noise ceiling 0.956): held-out pooled R^2 0.68 / 0.80 / 0.89 at 32 / 64 / 128 runs
against 0.61 / 0.76 / 0.84 with one output per point (and 0.14 / 0.42 / 0.77 with each
weight standardised on its own, which weighs a trailing, mostly-noise component like
the first).  A warm start projects the last round's curves onto the
new basis (:func:`~simcalib.metamodel.curves.unfold_layer`), so training continues
from what the nets had learnt.  Rows at the same inputs (replicates) give the
run-to-run noise: each weight's noise ceiling cuts the basis where the study's design
route cuts it (``min_weight_ceiling``), and the curve's pooled ceiling is recorded.
``info['series']`` holds per series the basis (as metamodel.json does), its number of
components, its held-out (cross-validated) reconstruction error and the pooled
out-of-bag R^2 of the curve.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from simcalib.config import schema_defaults
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.model import DTYPE, Metamodel, build_net, column_scale, r2_scores
from simcalib.metamodel.stacking import mean_of, to_torch
from simcalib.seeds import int_seed, rng


def _defaults() -> dict[str, Any]:
    return dict(schema_defaults("calibration.schema.yaml")["sequential"]["ensemble"])


@dataclass(frozen=True)
class EnsembleSettings:
    """How an ensemble is trained (defaults: ``calibration.sequential.ensemble`` in
    calibration.schema.yaml, the one source of truth)."""

    members: int
    hidden: tuple[int, ...]
    epochs: int
    warm_epochs: int
    patience: int
    lr: float
    weight_decay: float
    bootstrap: bool
    threads: int = 1

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None = None,
                    key: str = "calibration.sequential.ensemble") -> EnsembleSettings:
        c = {**_defaults(), **dict(cfg or {})}
        unknown = sorted(set(c) - {f for f in cls.__dataclass_fields__})
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}", "unknown setting; allowed: "
                              f"{sorted(cls.__dataclass_fields__)}")
        if int(c["members"]) < 1:
            raise ConfigError(f"{key}.members", "must be >= 1")
        if not c["hidden"] or any(int(w) < 1 for w in c["hidden"]):
            raise ConfigError(f"{key}.hidden", "give at least one hidden width >= 1")
        return cls(int(c["members"]), tuple(int(w) for w in c["hidden"]), int(c["epochs"]),
                   int(c["warm_epochs"]), int(c["patience"]), float(c["lr"]),
                   float(c["weight_decay"]), bool(c["bootstrap"]), int(c.get("threads", 1)))

    def for_batch(self, member_proposals: int) -> EnsembleSettings:
        """These settings with at least ``member_proposals`` members: a round whose
        batch outnumbers the members would otherwise solve the same member's MILP
        twice (the same optimum, nudged to a random point); one more bootstrap member
        per proposal keeps each proposal a distinct Thompson sample.  Unchanged when
        the batch is no larger than the ensemble."""
        if member_proposals <= self.members:
            return self
        from dataclasses import replace

        return replace(self, members=int(member_proposals))


@dataclass
class Ensemble:
    """M nets with shared scalers.  :meth:`predict` is the mean (raw units),
    :meth:`predict_members` every member's, :meth:`spread` their standard deviation;
    :meth:`member` and :meth:`mean_metamodel` are MILP-ready metamodels."""

    nets: list[nn.Sequential]
    input_names: list[str]
    output_names: list[str]
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.nets)

    # ---- prediction ----------------------------------------------------------------
    def _scaled_in(self, X: np.ndarray) -> torch.Tensor:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.shape[1] != len(self.input_names):
            raise DataError("ensemble input", f"{X.shape[1]} columns for "
                            f"{len(self.input_names)} inputs {self.input_names}")
        return torch.as_tensor((X - self.x_mean) / self.x_std, dtype=DTYPE)

    def predict_members(self, X: np.ndarray) -> np.ndarray:
        """Raw outputs of every member, shape (M, n, outputs)."""
        Xs = self._scaled_in(X)
        with torch.no_grad():
            out = np.stack([net(Xs).numpy() for net in self.nets])
        return out * self.y_std + self.y_mean

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The ensemble mean (raw units), shape (n, outputs)."""
        return self.predict_members(X).mean(axis=0)

    def spread(self, X: np.ndarray) -> np.ndarray:
        """Standard deviation over members (raw units; zeros for one member)."""
        P = self.predict_members(X)
        return P.std(axis=0, ddof=1) if len(P) > 1 else np.zeros(P.shape[1:])

    # ---- MILP-ready views ----------------------------------------------------------
    def _wrap(self, net: nn.Sequential, what: str) -> Metamodel:
        info = {"study": self.info.get("study", ""), "ensemble": what,
                "input_bounds": self.info.get("input_bounds", {})}
        if "series" in self.info:   # the bases (curves.bases_of reads them)
            info["series"] = self.info["series"]
        return Metamodel(net, self.input_names, self.output_names, self.x_mean, self.x_std,
                         self.y_mean, self.y_std, info)

    def member(self, i: int) -> Metamodel:
        """Member ``i`` as a metamodel (its own net; the shared scalers)."""
        return self._wrap(copy.deepcopy(self.nets[i]), f"member {i}")

    def mean_metamodel(self, first: int | None = None) -> Metamodel:
        """The ensemble mean as one ReLU net (exact; M times wider).  ``first``: the
        mean of the first that many members only (an ensemble grown for a large batch
        keeps its mean proposal's MILP the configured width)."""
        nets = self.nets if first is None else self.nets[: max(1, int(first))]
        layers = [[(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
                   for m in net if isinstance(m, nn.Linear)] for net in nets]
        return self._wrap(to_torch(mean_of(layers)), "mean")

    # ---- state (checkpoints of a resumable run) -------------------------------------
    def state(self) -> dict[str, Any]:
        return {"nets": [net.state_dict() for net in self.nets],
                "hidden": [m.out_features for m in self.nets[0] if isinstance(m, nn.Linear)][:-1],
                "input_names": self.input_names, "output_names": self.output_names,
                "x_mean": self.x_mean, "x_std": self.x_std, "y_mean": self.y_mean,
                "y_std": self.y_std, "info": self.info}

    @classmethod
    def from_state(cls, s: Mapping[str, Any]) -> Ensemble:
        nets = []
        for sd in s["nets"]:
            net = build_net(len(s["input_names"]), s["hidden"], len(s["output_names"]))
            net.load_state_dict(sd)
            nets.append(net.eval())
        return cls(nets, list(s["input_names"]), list(s["output_names"]),
                   np.asarray(s["x_mean"]), np.asarray(s["x_std"]), np.asarray(s["y_mean"]),
                   np.asarray(s["y_std"]), dict(s["info"]))


@dataclass
class _Heads:
    """How a fit's nets map to the ensemble's outputs: identity for scalar outputs; for
    a series study, the inner outputs (scalars then basis weights), their scalers and
    the bases (module doc)."""

    names: list[str]
    mean: np.ndarray
    std: np.ndarray
    bases: dict[str, Any]
    outputs: list[str]
    y_mean: np.ndarray        # the ensemble's (point) scalers after folding
    y_std: np.ndarray

    @property
    def series(self) -> bool:
        return bool(self.bases)

    def targets(self, Z: np.ndarray) -> torch.Tensor:
        return torch.as_tensor((Z - self.mean) / self.std, dtype=DTYPE)

    def to_inner(self, net: nn.Sequential, warm: Ensemble) -> nn.Sequential:
        """A warm member's folded last layer re-expressed over this fit's inner outputs."""
        from simcalib.metamodel.curves import unfold_layer

        last = net[len(net) - 1]
        W, b = unfold_layer(last.weight.detach().numpy(), last.bias.detach().numpy(),
                            warm.y_mean, warm.y_std, self.outputs, self.bases, self.names,
                            self.mean, self.std)
        return _with_last(net, W, b)

    def fold(self, net: nn.Sequential) -> nn.Sequential:
        from simcalib.metamodel.curves import fold_layer

        last = net[len(net) - 1]
        Wn, bn, _, _ = fold_layer(last.weight.detach().numpy(), last.bias.detach().numpy(),
                                  self.names, self.mean, self.std, self.outputs, self.bases)
        return _with_last(net, Wn, bn)


def _with_last(net: nn.Sequential, W: np.ndarray, b: np.ndarray) -> nn.Sequential:
    """``net`` with its last linear layer replaced by ``(W, b)`` (in place; returned)."""
    new = nn.Linear(W.shape[1], W.shape[0]).to(DTYPE)
    with torch.no_grad():
        new.weight.copy_(torch.as_tensor(W, dtype=DTYPE))
        new.bias.copy_(torch.as_tensor(b, dtype=DTYPE))
    net[len(net) - 1] = new
    return net


def replicate_diffs(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Differences of the outputs of runs at the same inputs (consecutive pairs within
    each group of equal rows of ``X``): the run-to-run noise, as a noise probe's pairs."""
    groups: dict[bytes, list[int]] = {}
    for i, row in enumerate(np.round(np.asarray(X, dtype=float), 12)):
        groups.setdefault(row.tobytes(), []).append(i)
    d = [Y[g[j + 1]] - Y[g[j]] for g in groups.values() for j in range(0, len(g) - 1, 2)]
    return np.array(d) if d else np.zeros((0, Y.shape[1]))


def _series_heads(X: np.ndarray, Y: np.ndarray, input_names: Sequence[str],
                  output_names: Sequence[str], warm: Ensemble | None,
                  series: Mapping[str, Any] | None) -> tuple[_Heads, np.ndarray, dict]:
    """The bases, the inner targets and the series' record of a fit (module doc)."""
    from simcalib.metamodel import curves

    _, groups = curves.series_groups(output_names)
    diffs = replicate_diffs(X, Y)
    noise = ({"series_diff": {n: diffs[:, idx] for n, idx in groups.items()}}
             if len(diffs) >= 2 else None)
    bases = curves.fit_bases(Y, output_names, np.arange(len(Y)), {"series": dict(series or {})},
                             noise, min_runs=3, where=f"the ensemble's {len(Y)} usable runs")
    df, names = curves.reduced_frame(X, Y, input_names, output_names, bases)
    Z = df[names].to_numpy(dtype=float)
    mean, std = Z.mean(axis=0), Z.std(axis=0)
    for name in groups:
        # one divisor for a series' weights (the root of their summed variances), not
        # one each: the loss is then the curve's squared error in its scale's units
        # (V is orthonormal), so a trailing, mostly-noise component weighs what it
        # explains; standardising each weight made the curve's held-out R^2 0.42
        # against 0.76 for one output per point at 64 epidemic runs
        # (benchmarks/curve_ensemble_fit.py)
        ws = [i for i, n in enumerate(names) if n.startswith(f"{name}{curves.WEIGHT_SEP}")]
        std[ws] = np.sqrt(np.sum(std[ws] ** 2))
    std = np.where(std > 0, std, 1.0)
    if warm is not None:   # a scalar output keeps the ensemble's scalers for its life
        pos = {n: i for i, n in enumerate(warm.output_names)}
        for i, n in enumerate(names):
            if n in pos:
                mean[i], std[i] = warm.y_mean[pos[n]], warm.y_std[pos[n]]
    _, _, y_mean, y_std = curves.fold_layer(np.zeros((len(names), 1)), np.zeros(len(names)),
                                            names, mean, std, output_names, bases)
    rec = {}
    for name, idx in groups.items():
        b = bases[name]
        r = {"points": len(idx), "components": b.k, "runs": b.n_runs,
             "basis_cv_rms": float(b.error["cv_rms"]),
             "basis_cv_relative": float(b.error["cv_rms"]) / b.scale,
             "basis_unexplained": float(b.error["unexplained"]),
             "replicate_pairs": len(diffs), "basis": b.to_json()}
        if "noise_cut_from" in b.error:
            r["cut_from_components"] = int(b.error["noise_cut_from"])
        if noise is not None:
            nv = float((diffs[:, idx] ** 2).mean(axis=0).sum() / 2.0)
            tv = float(Y[:, idx].var(axis=0).sum())
            r["noise_ceiling"] = max(0.0, 1.0 - nv / tv) if tv > 0 else float("nan")
            r["weight_ceiling"] = curves.weight_ceilings(b, Y[:, idx], diffs[:, idx]).tolist()
        rec[name] = r
    heads = _Heads(list(names), mean, std, bases, list(output_names), y_mean, y_std)
    return heads, Z, rec


def _pooled_r2(Y: np.ndarray, P: np.ndarray) -> float:
    sst = float(((Y - Y.mean(axis=0)) ** 2).sum())
    return 1.0 - float(((Y - P) ** 2).sum()) / sst if sst > 0 else float("nan")


def _train_member(net: nn.Sequential, Xtr: torch.Tensor, Ytr: torch.Tensor,
                  Xva: torch.Tensor | None, Yva: torch.Tensor | None, epochs: int,
                  patience: int, lr: float, weight_decay: float) -> int:
    """Full-batch Adam; early stopping on the validation rows when there are any
    (best weights restored).  Returns the epochs run."""
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.MSELoss()
    best, best_state, wait, ran = np.inf, None, 0, 0
    for ep in range(1, epochs + 1):
        ran = ep
        net.train()
        opt.zero_grad()
        loss = loss_fn(net(Xtr), Ytr)
        loss.backward()
        opt.step()
        if Xva is None or Yva is None:
            continue
        net.eval()
        with torch.no_grad():
            val = float(loss_fn(net(Xva), Yva))
        if val < best - 1e-12:
            best, best_state, wait = val, copy.deepcopy(net.state_dict()), 0
        else:
            wait += 1
            if wait >= patience:
                break
    if best_state is not None:
        net.load_state_dict(best_state)
    net.eval()
    return ran


def fit_ensemble(X: np.ndarray, Y: np.ndarray, input_names: Sequence[str],
                 output_names: Sequence[str], settings: EnsembleSettings | None = None,
                 seed: int = 0, tag: str | int = "", warm: Ensemble | None = None,
                 study: str = "", series: Mapping[str, Any] | None = None) -> Ensemble:
    """Train (or, with ``warm``, continue training) an ensemble on rows ``X``, ``Y``
    (raw units; rows with a non-finite value are dropped).

    ``tag`` names the fit within a run (a round number), so every fit draws its own
    bootstrap resamples from ``(seed, 'ensemble', tag, member)``.  A warm fit keeps
    ``warm``'s scalers and starts each member from its weights (``warm_epochs``
    epochs at most); a cold one fits the scalers on these rows (``epochs``)."""
    s = settings or EnsembleSettings.from_config()
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    good = np.isfinite(X).all(axis=1) & np.isfinite(Y).all(axis=1)
    X, Y = X[good], Y[good]
    n = len(X)
    if n < 2:
        raise DataError("ensemble", f"only {n} usable rows; need >= 2")
    if warm is not None:
        if list(warm.input_names) != list(input_names) or \
                list(warm.output_names) != list(output_names):
            raise DataError("ensemble", "warm start from an ensemble of other inputs/outputs")
        x_mean, x_std, y_mean, y_std = warm.x_mean, warm.x_std, warm.y_mean, warm.y_std
    else:
        x_mean, x_std = column_scale(X)
        y_mean, y_std = column_scale(Y)
    from simcalib.metamodel.curves import has_series

    heads, series_rec = None, {}
    if has_series(output_names):
        heads, Z, series_rec = _series_heads(X, Y, input_names, output_names, warm, series)
        y_mean, y_std = heads.y_mean, heads.y_std
    Xs = torch.as_tensor((X - x_mean) / x_std, dtype=DTYPE)
    Ys = (torch.as_tensor((Y - y_mean) / y_std, dtype=DTYPE) if heads is None
          else heads.targets(Z))
    t0 = time.perf_counter()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, s.threads))
    nets, oob_sum, oob_cnt, epochs = [], np.zeros(Y.shape), np.zeros(n), []
    try:
        for m in range(s.members):
            r = rng(seed, "ensemble", str(tag), m)
            if s.bootstrap and n >= 4:
                idx = r.integers(0, n, n)
                oob = np.setdiff1d(np.arange(n), idx)
            else:
                idx, oob = np.arange(n), np.zeros(0, dtype=np.int64)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int_seed(seed, "ensemble", "init", m))
                if warm is not None and m < len(warm.nets):
                    net = copy.deepcopy(warm.nets[m])
                    if heads is not None:
                        net = heads.to_inner(net, warm)
                else:
                    net = build_net(len(input_names), list(s.hidden),
                                    len(output_names) if heads is None else len(heads.names))
                va = oob if len(oob) else None
                ep = _train_member(net, Xs[idx], Ys[idx],
                                   None if va is None else Xs[va],
                                   None if va is None else Ys[va],
                                   s.warm_epochs if warm is not None else s.epochs,
                                   s.patience, s.lr, s.weight_decay)
            if heads is not None:
                net = heads.fold(net).eval()
            epochs.append(ep)
            nets.append(net)
            if len(oob):
                with torch.no_grad():
                    oob_sum[oob] += net(Xs[oob]).numpy() * y_std + y_mean
                oob_cnt[oob] += 1
    finally:
        torch.set_num_threads(old_threads)
    seen = oob_cnt > 0
    oob_r2 = (r2_scores(Y[seen], oob_sum[seen] / oob_cnt[seen, None]) if seen.sum() >= 2
              else np.full(Y.shape[1], np.nan))
    judged = oob_r2
    if heads is not None:
        # a curve is judged by its pooled R^2 (a flat tail's per-point R^2 says nothing)
        from simcalib.metamodel.curves import series_groups

        scal, groups = series_groups(output_names)
        judged = np.array([*oob_r2[scal], *(
            _pooled_r2(Y[seen][:, idx], (oob_sum[seen] / oob_cnt[seen, None])[:, idx])
            if seen.sum() >= 2 else np.nan for idx in groups.values())])
        for (name, _), v in zip(groups.items(), judged[len(scal):], strict=True):
            series_rec[name]["oob_r2"] = float(v)
    info = {"study": study, "rows": n, "members": s.members, "hidden": list(s.hidden),
            "warm": warm is not None, "epochs_run": epochs,
            "oob_r2": {o: float(v) for o, v in zip(output_names, oob_r2, strict=True)},
            "min_oob_r2": float(np.nanmin(judged)) if np.isfinite(judged).any() else None,
            "seconds": round(time.perf_counter() - t0, 3),
            "input_bounds": {nm: [float(X[:, i].min()), float(X[:, i].max())]
                             for i, nm in enumerate(input_names)}}
    if series_rec:
        info["series"] = series_rec
    return Ensemble(nets, list(input_names), list(output_names), np.asarray(x_mean),
                    np.asarray(x_std), np.asarray(y_mean), np.asarray(y_std), info)
