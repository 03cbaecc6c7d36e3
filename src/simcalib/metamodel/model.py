"""The ReLU metamodel: a ``nn.Sequential`` from (tunable + context) inputs to every
output of a study, with its scalers, names and files.  Training lives in
:mod:`simcalib.metamodel.training`; the MILP (:mod:`simcalib.metamodel.milp`) builds on
this module only, so the optimiser never depends on how a network was trained.

Why these choices:

* **Standardised inputs and outputs**, with scalers fitted on the training split only
  (no test leakage).  The MILP is built on the standardised network (input scaling
  folded into the first layer), so its objective is in standardised output units.
* **float64 throughout** (training, storage, prediction).  The MILP reproduces the
  network to ~1e-9; a float32 network would put 1e-7 rounding noise between torch
  and the MILP for no real speed gain on nets this small on a CPU.
* **MC dropout** (optional ``dropout > 0``): ``Dropout`` after every hidden ReLU,
  active only in :meth:`Metamodel.predict_mc`; :meth:`predict` and the MILP use the
  deterministic network (dropout off, the usual inverted-dropout scaling makes that
  the mean network).

Files: ``model.pt`` (the ``state_dict``) and ``metamodel.json`` (architecture,
scalers, names, input ranges, metrics).  Loading needs only these two files.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from simcalib import io, timing
from simcalib.errors import DataError

log = logging.getLogger(__name__)

MODEL_FILE = "model.pt"
#: the keys of metamodel.json its ``meta_sha256`` covers: what a prediction depends on
CHECKED_KEYS = ("input_names", "output_names", "hidden", "dropout", "x_mean", "x_std",
                "y_mean", "y_std")
META_FILE = "metamodel.json"
DTYPE = torch.float64

#: a column whose sd is at most this fraction of its largest magnitude is constant: the
#: sd of a constant column of floats is rounding noise (0.6 repeated gives 1.1e-16), and
#: dividing by it turns the rounding into inputs of size 1 and, folded into a MILP's
#: first layer, into weights of 1e16 whose cancellation is wrong by 0.1 (issue 42)
CONSTANT_RTOL = 1e-10


def column_scale(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column mean and sd for standardising, sd 1 where the column is constant (to
    rounding: :data:`CONSTANT_RTOL`), so that a constant input or output scales to 0
    exactly, never to rounding noise divided by rounding noise."""
    A = np.asarray(A, dtype=float)
    mean, sd = A.mean(axis=0), A.std(axis=0)
    scale = np.abs(A).max(axis=0) if len(A) else np.zeros(A.shape[1:])
    const = sd <= CONSTANT_RTOL * scale
    return np.where(const, A[0] if len(A) else mean, mean), np.where(const, 1.0, sd)


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
        #: the run-success classifier trained beside it (``failure.json``; None when no
        #: design run failed), attached by :func:`simcalib.metamodel.failure.load_metamodel`;
        #: every OP solve on this metamodel is then constrained to predicted success
        self.failure: Any = None
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
        """Write ``model.pt`` (state_dict) and ``metamodel.json``, each atomically.
        ``metamodel.json`` records the SHA-256 of ``model.pt`` and of its own scaling
        and architecture keys, checked by :meth:`load` (a flipped byte in either file
        would otherwise load without error and change every prediction)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        timing.write_torch(self.net.state_dict(), d / MODEL_FILE)
        meta = self.to_json()
        meta["model_sha256"] = io.sha256_file(d / MODEL_FILE)
        meta["meta_sha256"] = io.content_sha256({k: meta[k] for k in CHECKED_KEYS})
        timing.write_json(meta, d / META_FILE)  # train_seconds -> _timing.json

    @classmethod
    def load(cls, directory: str | Path) -> Metamodel:
        d = Path(directory)
        meta = io.read_json(d / META_FILE)
        needed = ["input_names", "output_names", "hidden", "x_mean", "x_std", "y_mean", "y_std"]
        missing = [k for k in needed if k not in meta]
        if missing:
            raise DataError(str(d / META_FILE), f"not a simcalib metamodel (missing {missing})")
        fix = (f"delete {d / MODEL_FILE} and {d / META_FILE} and rerun the workflow (rule "
               "mm_train retrains the metamodel)")
        if "meta_sha256" in meta:
            io.check_sha256(d / META_FILE, meta["meta_sha256"], io.content_sha256(
                {k: meta.get(k) for k in CHECKED_KEYS}), fix)
        if "model_sha256" in meta:
            if not (d / MODEL_FILE).is_file():
                raise DataError(str(d / MODEL_FILE), "file not found; " + fix)
            io.check_sha256(d / MODEL_FILE, meta["model_sha256"], io.sha256_file(d / MODEL_FILE),
                            fix)
        else:
            log.warning("%s: no checksum recorded (written by an older simcalib), so a damaged "
                        "%s cannot be detected; %s to get one", d / META_FILE, MODEL_FILE, fix)
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
                if k not in needed and k not in ("dropout", "dtype", "model_sha256",
                                                 "meta_sha256")}
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



def r2_scores(Y: np.ndarray, P: np.ndarray) -> np.ndarray:
    ss_res = ((Y - P) ** 2).sum(axis=0)
    ss_tot = ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    return 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0)
