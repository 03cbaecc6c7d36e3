"""Neural-network metamodels: a ReLU ``nn.Sequential`` from (tunable + context) inputs
to every output of a study.

Why these choices:

* **Standardised inputs and outputs**, with scalers fitted on the training split only
  (no test leakage).  The MILP is built on the standardised network (input scaling
  folded into the first layer), so its objective is in standardised output units.
* **float64 throughout** (training, storage, prediction).  The MILP reproduces the
  network to ~1e-9; a float32 network would put 1e-7 rounding noise between torch
  and the MILP for no real speed gain on nets this small on a CPU.
* **Early stopping** on the validation loss keeps the best weights, and the final
  metrics (``test_r2`` per output, ``test_mae`` in raw units) are computed on a test
  split the training never saw.
* **MC dropout** (optional ``dropout > 0``): ``Dropout`` after every hidden ReLU,
  active only in :meth:`Metamodel.predict_mc`; :meth:`predict` and the MILP use the
  deterministic network (dropout off, the usual inverted-dropout scaling makes that
  the mean network).

Files: ``model.pt`` (the ``state_dict``) and ``metamodel.json`` (architecture,
scalers, names, input ranges, metrics).  Loading needs only these two files.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from simcalib import io, timing
from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError, DataError
from simcalib.progress import eta, every
from simcalib.seeds import int_seed, rng

log = logging.getLogger(__name__)

MODEL_FILE = "model.pt"
META_FILE = "metamodel.json"
DTYPE = torch.float64

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


def build_net(n_in: int, hidden: Sequence[int], n_out: int, dropout: float = 0.0
              ) -> nn.Sequential:
    """``Linear, ReLU, [Dropout]`` per hidden width, then a final ``Linear``."""
    layers: list[nn.Module] = []
    prev = n_in
    for w in hidden:
        layers += [nn.Linear(prev, int(w)), nn.ReLU()]
        if dropout > 0:
            layers.append(nn.Dropout(float(dropout)))
        prev = int(w)
    layers.append(nn.Linear(prev, n_out))
    return nn.Sequential(*layers).to(DTYPE)


class Metamodel:
    """A trained network with its scalers and names.

    ``net`` maps *standardised* inputs to *standardised* outputs; :meth:`predict`
    handles the scaling.  ``info`` holds what ``metamodel.json`` records beyond the
    arrays (study, hidden widths, metrics, input ranges, training config)."""

    def __init__(self, net: nn.Sequential, input_names: Sequence[str],
                 output_names: Sequence[str], x_mean: np.ndarray, x_std: np.ndarray,
                 y_mean: np.ndarray, y_std: np.ndarray, info: Mapping[str, Any] | None = None
                 ) -> None:
        self.net = net.to(DTYPE)
        self.net.eval()
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.x_mean = np.asarray(x_mean, dtype=float)
        self.x_std = np.asarray(x_std, dtype=float)
        self.y_mean = np.asarray(y_mean, dtype=float)
        self.y_std = np.asarray(y_std, dtype=float)
        self.info: dict[str, Any] = dict(info or {})

    # ---- properties ----------------------------------------------------------------
    @property
    def study(self) -> str:
        return str(self.info.get("study", ""))

    @property
    def hidden(self) -> list[int]:
        return [m.out_features for m in self.net if isinstance(m, nn.Linear)][:-1]

    @property
    def dropout(self) -> float:
        ps = [m.p for m in self.net if isinstance(m, nn.Dropout)]
        return float(ps[0]) if ps else 0.0

    @property
    def test_r2(self) -> dict[str, float]:
        return dict(self.info.get("test_r2", {}))

    def linear_layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(W, b)`` of every Linear layer (standardised units), ReLU between them."""
        return [(m.weight.detach().cpu().numpy().astype(float).copy(),
                 m.bias.detach().cpu().numpy().astype(float).copy())
                for m in self.net if isinstance(m, nn.Linear)]

    # ---- prediction ----------------------------------------------------------------
    def _as_array(self, X: np.ndarray | pd.DataFrame) -> np.ndarray:
        if isinstance(X, pd.DataFrame):
            missing = [c for c in self.input_names if c not in X.columns]
            if missing:
                raise DataError("metamodel input", f"missing input column(s) {missing}")
            X = X[self.input_names].to_numpy(dtype=float)
        X = np.asarray(X, dtype=float)
        if X.ndim == 1:
            X = X[None, :]
        if X.shape[-1] != len(self.input_names):
            raise DataError("metamodel input", f"{X.shape[-1]} input columns for "
                            f"{len(self.input_names)} inputs {self.input_names}")
        return X

    def scale_inputs(self, X: np.ndarray | pd.DataFrame) -> np.ndarray:
        return (self._as_array(X) - self.x_mean) / self.x_std

    def scale_outputs(self, Y: np.ndarray) -> np.ndarray:
        """``(Y - y_mean) / y_std``: the units of the OP objective."""
        return (np.asarray(Y, dtype=float) - self.y_mean) / self.y_std

    def unscale_outputs(self, Ys: np.ndarray) -> np.ndarray:
        return np.asarray(Ys, dtype=float) * self.y_std + self.y_mean

    def predict_scaled(self, X: np.ndarray | pd.DataFrame) -> np.ndarray:
        """Standardised outputs (dropout off)."""
        Xs = torch.as_tensor(self.scale_inputs(X), dtype=DTYPE)
        self.net.eval()
        with torch.no_grad():
            return self.net(Xs).numpy()

    def predict(self, X: np.ndarray | pd.DataFrame) -> np.ndarray:
        """Raw outputs from raw inputs (dropout off)."""
        return self.unscale_outputs(self.predict_scaled(X))

    def predict_mc(self, X: np.ndarray | pd.DataFrame, n_samples: int = 50, seed: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
        """MC-dropout mean and standard deviation in raw units.  Without dropout
        layers this is the deterministic prediction with zero spread."""
        if self.dropout <= 0:
            mu = self.predict(X)
            return mu, np.zeros_like(mu)
        Xs = torch.as_tensor(self.scale_inputs(X), dtype=DTYPE)
        draws = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            self.net.train()
            try:
                with torch.no_grad():
                    for _ in range(int(n_samples)):
                        draws.append(self.net(Xs).numpy())
            finally:
                self.net.eval()
        raw = self.unscale_outputs(np.stack(draws))
        return raw.mean(axis=0), raw.std(axis=0, ddof=1) if n_samples > 1 else np.zeros(
            raw.shape[1:])

    # ---- files ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            **self.info,
            "input_names": self.input_names,
            "output_names": self.output_names,
            "hidden": self.hidden,
            "dropout": self.dropout,
            "dtype": "float64",
            "x_mean": self.x_mean.tolist(),
            "x_std": self.x_std.tolist(),
            "y_mean": self.y_mean.tolist(),
            "y_std": self.y_std.tolist(),
        }

    def save(self, directory: str | Path) -> None:
        """Write ``model.pt`` (state_dict) and ``metamodel.json``, each atomically."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        timing.write_torch(self.net.state_dict(), d / MODEL_FILE)
        timing.write_json(self.to_json(), d / META_FILE)  # train_seconds -> _timing.json

    @classmethod
    def load(cls, directory: str | Path) -> Metamodel:
        d = Path(directory)
        meta = io.read_json(d / META_FILE)
        needed = ["input_names", "output_names", "hidden", "x_mean", "x_std", "y_mean", "y_std"]
        missing = [k for k in needed if k not in meta]
        if missing:
            raise DataError(str(d / META_FILE), f"not a simcalib metamodel (missing {missing})")
        net = build_net(len(meta["input_names"]), meta["hidden"], len(meta["output_names"]),
                        float(meta.get("dropout", 0.0)))
        try:
            state = torch.load(d / MODEL_FILE, map_location="cpu", weights_only=True)
            net.load_state_dict(state)
        except FileNotFoundError:
            raise DataError(str(d / MODEL_FILE), "file not found") from None
        except (RuntimeError, KeyError, ValueError) as exc:
            raise DataError(str(d / MODEL_FILE), f"does not match {META_FILE}: {exc}") from None
        info = {k: v for k, v in meta.items()
                if k not in needed and k not in ("dropout", "dtype")}
        return cls(net, meta["input_names"], meta["output_names"], np.array(meta["x_mean"]),
                   np.array(meta["x_std"]), np.array(meta["y_mean"]), np.array(meta["y_std"]),
                   info)

    def check_compatible(self, study: str, input_names: Sequence[str],
                         output_names: Sequence[str] | None = None, source: str = "metamodel"
                         ) -> None:
        """Raise DataError when this metamodel was trained for another study or on
        other inputs/outputs than the ones given (input order may differ: the MILP
        matches inputs by name)."""
        if study and self.study and self.study != study:
            raise DataError(source, f"metamodel was trained for study {self.study!r}, "
                            f"not {study!r}")
        if sorted(input_names) != sorted(self.input_names):
            raise DataError(source, f"metamodel inputs {self.input_names} differ from the "
                            f"study's inputs {list(input_names)}")
        if output_names is not None and list(output_names) != self.output_names:
            raise DataError(source, f"metamodel outputs {self.output_names} differ from the "
                            f"study's outputs {list(output_names)}")


# ---- training -----------------------------------------------------------------------

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


def r2_scores(Y: np.ndarray, P: np.ndarray) -> np.ndarray:
    ss_res = ((Y - P) ** 2).sum(axis=0)
    ss_tot = ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    return 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0)


def train_metamodel(df: pd.DataFrame, input_names: Sequence[str], output_names: Sequence[str],
                    cfg: Mapping[str, Any], seed: int, study: str = ""
                    ) -> tuple[Metamodel, dict[str, Any]]:
    """Train a metamodel on the ``status == 'ok'`` rows of ``df``.

    Split, weight init and minibatch order all derive from ``(seed, 'metamodel',
    study)``, so a rerun gives the same network.  Returns the metamodel and its
    metrics (``test_r2`` and ``test_mae`` per output, ``val_loss``, epochs, seconds)."""
    c = _cfg(cfg)
    _check_cfg(c)
    X, Y = _clean(df, input_names, output_names, "dataset")
    n = len(X)
    if n < 10:
        from simcalib.simulation import failure_digest

        raise DataError("dataset", f"only {n} usable rows (status ok, finite); need >= 10 "
                        f"({failure_digest(df)})")
    r = rng(seed, "metamodel", study, "split")
    perm = r.permutation(n)
    n_te = max(1, int(round(float(c["split"]["test"]) * n)))
    n_va = max(1, int(round(float(c["split"]["val"]) * n)))
    te, va, tr = perm[:n_te], perm[n_te:n_te + n_va], perm[n_te + n_va:]
    x_mean, x_std = X[tr].mean(axis=0), X[tr].std(axis=0)
    y_mean, y_std = Y[tr].mean(axis=0), Y[tr].std(axis=0)
    x_std = np.where(x_std > 0, x_std, 1.0)
    y_std = np.where(y_std > 0, y_std, 1.0)

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
        from simcalib.metamodel.solvable import solvable_phase

        solv = solvable_phase(net, c, Xs, Ys, tr, va, te, Y, y_mean, y_std, seed, study)
    finally:
        torch.set_num_threads(old_threads)
    seconds = time.perf_counter() - t0
    net.eval()
    with torch.no_grad():
        P = net(t(Xs[te])).numpy() * y_std + y_mean
    r2 = r2_scores(Y[te], P)
    mae = np.abs(Y[te] - P).mean(axis=0)
    min_r2 = float(c["min_r2"])
    low = [o for o, v in zip(output_names, r2, strict=True) if not v >= min_r2]
    if low:
        log.warning("%s: metamodel test R2 below min_r2 = %g for %s (%s): its predictions, "
                    "and every OP result built on them, are not trustworthy", study or "metamodel",
                    min_r2, low, ", ".join(f"{v:.3f}" for o, v in
                                           zip(output_names, r2, strict=True) if o in low))
    metrics: dict[str, Any] = {
        "test_r2": {o: float(v) for o, v in zip(output_names, r2, strict=True)},
        "test_mae": {o: float(v) for o, v in zip(output_names, mae, strict=True)},
        "min_test_r2": float(r2.min()),
        "n_train": int(len(tr)), "n_val": int(len(va)), "n_test": int(len(te)),
        "min_r2": min_r2,
        "r2_ok": not low,
        "low_r2_outputs": low,
        "train_seconds": round(seconds, 3),
        **fit,
    }
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
    from simcalib.metamodel.milp.boxbounds import metamodel_stability

    mm.info["stability"] = metrics["stability"] = metamodel_stability(mm)
    log.info("%s: trained %s in %.1f s (%d epochs); min test R2 %.4f", study or "metamodel",
             c["hidden"], seconds, fit["epochs_run"], r2.min())
    return mm, metrics


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


# ---- config checks a schema cannot express -------------------------------------------


# The config check (split sums to 1, optimize.weights name outputs) lives in
# simcalib.metamodel.checks, so validating a config never has to import torch.
from simcalib.metamodel.checks import check_metamodel_config as check_config  # noqa: E402,F401
