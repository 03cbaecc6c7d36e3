"""A run-success classifier and its constraint in the MILP.

Why: the metamodel only ever sees successful runs, so where the simulator fails it
extrapolates, and OP may put its anchor exactly there (an integer input at a value
where the program never produces an output); PtS and ``adaptive`` then spend the
whole budget in the failing region because their proximity box keeps the anchor's
integer value.  A small ReLU classifier of "this run succeeds" (status ``ok``),
trained on every run with its status, tells OP where not to look.

* :func:`fit_failure` trains it (logistic loss, the two classes weighted equally, so
  a few failures among many successes still count) and measures its held-out
  accuracy on a stratified fifth of the runs before refitting on all of them.  It
  returns ``None`` when no run failed (or none succeeded): then there is nothing to
  learn, the constraint is skipped and every result is what it was without it.
* :func:`guarded` puts the classifier next to a metamodel as one network with one
  extra output, the success logit (:func:`simcalib.metamodel.stacking.side_by_side`),
  recorded as a *constraint output*: the MILP gives it weight 0 in the objective and
  a lower bound ``log(t / (1 - t))``, i.e. predicted success probability >= t
  (``metamodel.failure.threshold``, default 0.5).  The MILP code sees one ReLU net
  and one output bound (:mod:`simcalib.metamodel.milp.problem`), nothing else.

Seeds from ``(seed, 'failure', tag)``; one torch thread, so the same call gives the
same classifier bit for bit in every process.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simcalib.config import schema_defaults
from simcalib.errors import ConfigError
from simcalib.metamodel.model import DTYPE, Metamodel, build_net, column_scale
from simcalib.metamodel.stacking import rescale_inputs, side_by_side, to_torch
from simcalib.seeds import int_seed, rng

#: name of the success-logit output of a guarded metamodel
LOGIT = "__success_logit"
#: ``Metamodel.info`` key listing constraint outputs: {output: lower bound (raw units)}
CONSTRAINT_OUTPUTS = "constraint_outputs"


def failure_defaults() -> dict[str, Any]:
    """``metamodel.failure``'s defaults (metamodel.schema.yaml)."""
    return dict(schema_defaults("metamodel.schema.yaml")["failure"])


def check_failure(cfg: Mapping[str, Any], key: str = "metamodel.failure") -> dict[str, Any]:
    """The failure settings over the defaults, checked."""
    c = {**failure_defaults(), **dict(cfg or {})}
    if c["model"] not in ("auto", "off"):
        raise ConfigError(f"{key}.model", f"'auto' or 'off', got {c['model']!r}")
    if not 0.0 < float(c["threshold"]) < 1.0:
        raise ConfigError(f"{key}.threshold", f"must lie in (0, 1), got {c['threshold']}")
    if not c["hidden"] or any(int(w) < 1 for w in c["hidden"]):
        raise ConfigError(f"{key}.hidden", "give at least one hidden width >= 1")
    return c


@dataclass
class FailureModel:
    """P(run succeeds | inputs) as a ReLU net on standardised inputs (a logit out)."""

    net: nn.Sequential
    input_names: list[str]
    x_mean: np.ndarray
    x_std: np.ndarray
    threshold: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def logit_bound(self) -> float:
        """The logit at the threshold probability: log(t / (1 - t))."""
        return math.log(self.threshold / (1.0 - self.threshold))

    @property
    def accuracy(self) -> float:
        """Held-out accuracy (NaN when too few runs to hold any out)."""
        return float(self.info.get("accuracy", float("nan")))

    def logit(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        with torch.no_grad():
            z = self.net(torch.as_tensor((X - self.x_mean) / self.x_std, dtype=DTYPE))
        return z.numpy()[:, 0]

    def prob(self, X: np.ndarray) -> np.ndarray:
        """Predicted probability that a run at each row of ``X`` succeeds."""
        return 1.0 / (1.0 + np.exp(-self.logit(X)))

    def ok(self, X: np.ndarray) -> np.ndarray:
        """Rows predicted to succeed (probability >= the threshold)."""
        return self.logit(X) >= self.logit_bound

    def layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
                for m in self.net if isinstance(m, nn.Linear)]


def _train(X: np.ndarray, ok: np.ndarray, hidden: Sequence[int], epochs: int, lr: float,
           seed: int, tag: str) -> nn.Sequential:
    n_ok, n_bad = int(ok.sum()), int((~ok).sum())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int_seed(seed, "failure", tag, "init"))
        net = build_net(X.shape[1], list(hidden), 1)
        Xt = torch.as_tensor(X, dtype=DTYPE)
        yt = torch.as_tensor(ok.astype(float)[:, None], dtype=DTYPE)
        # equal total weight per class: a rare class is not drowned out
        w = np.where(ok, 0.5 / max(n_ok, 1), 0.5 / max(n_bad, 1)) * len(ok)
        loss_fn = nn.BCEWithLogitsLoss(weight=torch.as_tensor(w[:, None], dtype=DTYPE))
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-5)
        for _ in range(epochs):
            opt.zero_grad()
            loss = loss_fn(net(Xt), yt)
            loss.backward()
            opt.step()
    return net.eval()


def fit_failure(X: np.ndarray, ok: np.ndarray, input_names: Sequence[str],
                cfg: Mapping[str, Any] | None = None, seed: int = 0,
                tag: str | int = "") -> FailureModel | None:
    """Train the classifier on runs ``X`` (raw inputs in ``input_names`` order) with
    success flags ``ok``; ``None`` when ``metamodel.failure.model`` is ``off`` or
    when every run succeeded (or every run failed: nothing to tell apart)."""
    c = check_failure(cfg or {})
    X = np.asarray(X, dtype=float)
    ok = np.asarray(ok, dtype=bool)
    keep = np.isfinite(X).all(axis=1)
    X, ok = X[keep], ok[keep]
    if c["model"] == "off" or ok.all() or not ok.any():
        return None
    x_mean, x_std = column_scale(X)
    Xs = (X - x_mean) / x_std
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # held-out accuracy: a stratified fifth (at least one run of each class)
        r = rng(seed, "failure", str(tag), "split")
        test = np.zeros(len(ok), dtype=bool)
        for cls in (True, False):
            idx = np.flatnonzero(ok == cls)
            k = int(round(0.2 * len(idx)))
            if len(idx) >= 5 and k >= 1:
                test[r.choice(idx, k, replace=False)] = True
        acc = bal = float("nan")
        if test.any() and ok[~test].any() and (~ok[~test]).any():
            net = _train(Xs[~test], ok[~test], c["hidden"], int(c["epochs"]), float(c["lr"]),
                         seed, f"{tag}:heldout")
            with torch.no_grad():
                pred = net(torch.as_tensor(Xs[test], dtype=DTYPE)).numpy()[:, 0] >= 0.0
            acc = float((pred == ok[test]).mean())
            rec = [float((pred[ok[test] == cls] == cls).mean())
                   for cls in (True, False) if (ok[test] == cls).any()]
            bal = float(np.mean(rec))
        net = _train(Xs, ok, c["hidden"], int(c["epochs"]), float(c["lr"]), seed, str(tag))
    finally:
        torch.set_num_threads(old)
    with torch.no_grad():
        train_acc = float(((net(torch.as_tensor(Xs, dtype=DTYPE)).numpy()[:, 0] >= 0.0)
                           == ok).mean())
    info = {"runs": int(len(ok)), "failed": int((~ok).sum()), "accuracy": acc,
            "balanced_accuracy": bal, "heldout": int(test.sum()), "train_accuracy": train_acc,
            "threshold": float(c["threshold"]), "hidden": list(c["hidden"])}
    return FailureModel(net, list(input_names), x_mean, x_std, float(c["threshold"]), info)


def guarded(mm: Metamodel, fm: FailureModel | None) -> Metamodel:
    """``mm`` with the success logit as one more output that the MILP constrains
    (logit >= ``fm.logit_bound``) and leaves out of the objective.  ``None``: ``mm``
    itself, unchanged."""
    if fm is None:
        return mm
    if sorted(fm.input_names) != sorted(mm.input_names):
        raise ConfigError("metamodel.failure", f"classifier inputs {fm.input_names} differ "
                          f"from the metamodel's {mm.input_names}")
    order = [fm.input_names.index(n) for n in mm.input_names]
    cl = fm.layers()
    W0, b0 = cl[0]
    cl[0] = (W0[:, order], b0)
    cl = rescale_inputs(cl, fm.x_mean[order], fm.x_std[order], mm.x_mean, mm.x_std)
    net = to_torch(side_by_side([mm.linear_layers(), cl]))
    info = copy.deepcopy(mm.info)
    info[CONSTRAINT_OUTPUTS] = {LOGIT: fm.logit_bound}
    return Metamodel(net, mm.input_names, [*mm.output_names, LOGIT], mm.x_mean, mm.x_std,
                     np.append(mm.y_mean, 0.0), np.append(mm.y_std, 1.0), info)


#: the classifier's file beside model.pt and metamodel.json
FILE = "failure.json"


def save_failure(fm: FailureModel | None, directory: str | Path) -> Path:
    """Write ``failure.json`` into the metamodel's directory: the classifier's layers,
    input standardisation, threshold and held-out accuracy, or ``{"model": null}``
    when there is none (no design run failed, or ``model: off``).  Always written, so
    the workflow's file set does not depend on the data."""
    from simcalib import io

    path = Path(directory) / FILE
    if fm is None:
        io.write_json({"model": None}, path)
        return path
    body = {"model": "relu-classifier", "input_names": fm.input_names,
            "x_mean": fm.x_mean.tolist(), "x_std": fm.x_std.tolist(),
            "threshold": fm.threshold,
            "layers": [[W.tolist(), b.tolist()] for W, b in fm.layers()],
            "info": fm.info}
    # its own digest: a damaged weight would otherwise silently move OP's feasible region
    io.write_json({**body, "sha256": io.content_sha256(body)}, path)
    return path


def load_failure(directory: str | Path) -> FailureModel | None:
    """The classifier saved by :func:`save_failure` (None when the directory has none,
    e.g. a metamodel trained before it existed, or when no design run failed)."""
    from simcalib import io
    from simcalib.errors import DataError

    path = Path(directory) / FILE
    if not path.is_file():
        return None
    d = io.read_json(path)
    if not d.get("model"):
        return None
    if "sha256" in d:
        body = {k: v for k, v in d.items() if k != "sha256"}
        io.check_sha256(path, d["sha256"], io.content_sha256(body),
                        f"delete {path} and rerun the workflow (rule mm_train rewrites it)")
    try:
        layers = [(np.asarray(W, dtype=float), np.asarray(b, dtype=float))
                  for W, b in d["layers"]]
        return FailureModel(to_torch(layers), list(d["input_names"]),
                            np.asarray(d["x_mean"], dtype=float),
                            np.asarray(d["x_std"], dtype=float), float(d["threshold"]),
                            dict(d.get("info") or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(str(path), f"not a failure model ({exc}); delete it and rerun "
                        "mm-train") from None


def load_metamodel(directory: str | Path) -> Metamodel:
    """The metamodel saved in ``directory`` with its run-success classifier attached
    (``mm.failure``; None when the directory has none): what every calibration
    command loads, so OP avoids where the design's runs failed."""
    mm = Metamodel.load(directory)
    mm.failure = load_failure(directory)
    return mm
