"""Solvable training: metamodels whose MILP embedding is easy (few undecided
ReLUs over the calibration box, so HiGHS proves OP in seconds instead of timing out).

The MILP of Optimally-Predict needs one binary per ReLU whose sign is *undecided*
over the calibration box; a neuron that is always active or always inactive there
is linear and costs no binary.  Xiao, Tjeng, Shafiullah & Madry (ICLR 2019,
"Training for faster adversarial robustness verification via inducing ReLU
stability") showed that a ReLU-stability (RS) penalty on the interval bounds of the
pre-activations plus weight sparsity (L1, magnitude pruning) make MILP verification
an order of magnitude faster at almost no loss of accuracy.  We do the same over
the metamodel's input box (the range of the training data, in standardised units;
tunables and contexts alike, which is the box the MILP searches).

How, and why this way:

* **Fine-tune from the plain net.**  The plain network is trained first (as with
  ``solvable`` off); its validation R² per output is the reference.  The solvable
  phase continues from it with the penalties on, and keeps the epoch with the
  fewest unstable neurons among those whose validation R² stays within
  ``r2_tolerance`` of the reference on *every* output (ties: lower validation
  loss).  So accuracy is protected by construction on the validation split, and
  the plain net is kept when no epoch qualifies.
* **RS penalty.**  For an unstable neuron with interval bounds ``l < 0 < u`` over
  the box, ``min(u, -l) / (u - l)``: the fraction of its range on the minority
  side (0 for a stable neuron, 1/2 for a hyperplane through the box's middle).
  Xiao et al. use ``-tanh(1 + l u)`` on small eps-balls; over a whole box ``l u``
  is large and negative for most neurons, where tanh is flat and the gradient
  vanishes.  The ratio is scale-free (shrinking weights cannot fake stability) and
  its gradient does not vanish.  Bounds are interval arithmetic, differentiable
  in torch (exact for the first layer on a box, looser deeper down).
* **Sparsity.**  L1 on all weights (mean absolute weight, so the coefficient does
  not depend on the width) and gradual magnitude pruning of the hidden layers'
  weights up to the fraction ``prune`` (masks re-applied after every step).
  Sparse rows make interval bounds tighter and the LPs of bound tightening smaller.

The result records ``solvable`` (settings, reference and final validation R²,
chosen epoch, interval-unstable neurons before/after, sparsity) in metamodel.json.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from simcalib.config import schema_defaults
from simcalib.metamodel.model import DTYPE, r2_scores
from simcalib.seeds import int_seed

log = logging.getLogger(__name__)

#: Defaults of ``metamodel.solvable``, from metamodel.schema.yaml (the one source of truth).
SOLVABLE_DEFAULTS: dict[str, Any] = schema_defaults("metamodel.schema.yaml")["solvable"]


def settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**SOLVABLE_DEFAULTS, **dict(cfg or {})}


def linears(net: nn.Sequential) -> list[nn.Linear]:
    return [m for m in net if isinstance(m, nn.Linear)]


def interval_preacts(net: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor
                     ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Interval bounds ``(l, u)`` of every hidden layer's pre-activation over the
    box ``[lo, hi]`` (standardised inputs), differentiable in the weights."""
    out = []
    a_lo, a_hi = lo, hi
    lins = linears(net)
    for lin in lins[:-1]:
        W, b = lin.weight, lin.bias
        c, r = (a_hi + a_lo) / 2, (a_hi - a_lo) / 2
        mid = W @ c + b
        rad = W.abs() @ r
        L, U = mid - rad, mid + rad
        out.append((L, U))
        a_lo, a_hi = torch.relu(L), torch.relu(U)
    return out


def rs_penalty(bounds: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Mean over hidden neurons of ``min(u, -l)^+ / (u - l)`` (0 when stable)."""
    terms = []
    for L, U in bounds:
        side = torch.minimum(torch.relu(U), torch.relu(-L))
        terms.append(side / (U - L + 1e-9))
    return torch.cat(terms).mean()


def count_unstable(net: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor) -> int:
    with torch.no_grad():
        return int(sum(int(((L < 0) & (U > 0)).sum()) for L, U in
                       interval_preacts(net, lo, hi)))


def _val_r2(net: nn.Sequential, X: torch.Tensor, Y: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        P = net(X).numpy()
    Yn = Y.numpy()
    ss_res = ((Yn - P) ** 2).sum(axis=0)
    ss_tot = ((Yn - Yn.mean(axis=0)) ** 2).sum(axis=0)
    return 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0)


def _prune_masks(net: nn.Sequential, fraction: float) -> list[torch.Tensor]:
    """Keep-masks zeroing the ``fraction`` smallest-magnitude weights of each hidden
    layer (the output layer is left dense: it has no ReLU and costs no binary)."""
    masks = []
    for lin in linears(net)[:-1]:
        w = lin.weight.detach().abs()
        k = int(fraction * w.numel())
        if k <= 0:
            masks.append(torch.ones_like(w, dtype=torch.bool))
            continue
        thr = w.flatten().kthvalue(k).values
        masks.append(w > thr)
    return masks


def _apply_masks(net: nn.Sequential, masks: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for lin, m in zip(linears(net)[:-1], masks, strict=True):
            lin.weight.mul_(m)


def make_solvable(net: nn.Sequential, Xtr: torch.Tensor, Ytr: torch.Tensor,
                  Xva: torch.Tensor, Yva: torch.Tensor, box_lo: np.ndarray,
                  box_hi: np.ndarray, cfg: Mapping[str, Any], loss_name: str,
                  batch_size: int, gen: torch.Generator) -> tuple[nn.Sequential, dict[str, Any]]:
    """Fine-tune a copy of the trained ``net`` for ReLU stability and sparsity over
    the box (standardised inputs).  Returns (network, record for metamodel.json)."""
    s = settings(cfg)
    dtype = next(net.parameters()).dtype
    lo = torch.as_tensor(box_lo, dtype=dtype)
    hi = torch.as_tensor(box_hi, dtype=dtype)
    ref_r2 = _val_r2(net, Xva, Yva)
    tol = float(s["r2_tolerance"])
    unstable0 = count_unstable(net, lo, hi)
    loss_fn = nn.L1Loss() if loss_name == "mae" else nn.MSELoss()
    work = copy.deepcopy(net)
    opt = torch.optim.Adam(work.parameters(), lr=float(s["lr"]))
    n = Xtr.shape[0]
    bs = max(1, min(int(batch_size), n))
    epochs = int(s["epochs"])
    prune = float(s["prune"])
    # gradual pruning: 10 equal steps over the first 2/3 of the epochs
    prune_at = {max(1, int(round(i * 2 * epochs / 30))): prune * i / 10 for i in range(1, 11)} \
        if prune > 0 else {}
    masks: list[torch.Tensor] | None = None
    rs_w, l1_w = float(s["rs_weight"]), float(s["l1_weight"])
    n_weights = sum(lin.weight.numel() for lin in linears(work))
    best = (unstable0, float(loss_fn(net(Xva), Yva).detach()), 0)
    best_state = copy.deepcopy(net.state_dict())
    for epoch in range(1, epochs + 1):
        if epoch in prune_at:
            masks = _prune_masks(work, prune_at[epoch])
            _apply_masks(work, masks)
        work.train()
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            loss = loss_fn(work(Xtr[idx]), Ytr[idx])
            if rs_w > 0:
                loss = loss + rs_w * rs_penalty(interval_preacts(work, lo, hi))
            if l1_w > 0:
                loss = loss + l1_w * sum(lin.weight.abs().sum() for lin in linears(work)) \
                    / n_weights
            loss.backward()
            opt.step()
            if masks is not None:
                _apply_masks(work, masks)
        work.eval()
        r2 = _val_r2(work, Xva, Yva)
        if np.all(r2 >= ref_r2 - tol):
            unstable = count_unstable(work, lo, hi)
            with torch.no_grad():
                val = float(loss_fn(work(Xva), Yva))
            if (unstable, val) < best[:2]:
                best = (unstable, val, epoch)
                best_state = copy.deepcopy(work.state_dict())
    out = copy.deepcopy(net)
    out.load_state_dict(best_state)
    out.eval()
    final_r2 = _val_r2(out, Xva, Yva)
    zeros = sum(int((lin.weight == 0).sum()) for lin in linears(out)[:-1])
    total = sum(lin.weight.numel() for lin in linears(out)[:-1])
    rec = {
        "settings": {k: s[k] for k in sorted(s)},
        "applied": best[2] > 0,
        "chosen_epoch": int(best[2]),
        "epochs_run": epochs,
        "interval_unstable_plain": int(unstable0),
        "interval_unstable": int(best[0]),
        "hidden_sparsity": round(zeros / total, 4) if total else 0.0,
        "val_r2_plain_min": float(ref_r2.min()),
        "val_r2_min": float(final_r2.min()),
        "val_r2_max_drop": float(np.max(ref_r2 - final_r2)),
    }
    if not rec["applied"]:
        log.warning("solvable training: no epoch kept validation R2 within %g of the plain "
                    "net on every output; the plain net is kept", tol)
    return out, rec


def solvable_phase(net: nn.Sequential, c: Mapping[str, Any], Xs: np.ndarray,
                   Ys: np.ndarray, tr: np.ndarray, va: np.ndarray, te: np.ndarray, Y: np.ndarray,
                   y_mean: np.ndarray, y_std: np.ndarray, seed: int, study: str
                   ) -> dict[str, Any] | None:
    """Solvable fine-tuning of the trained ``net`` in place when
    ``metamodel.solvable.enabled`` is true, or ``auto`` and the plain net has more than
    ``min_unstable`` unstable neurons over the box (a small net the MILP proves in
    seconds keeps its accuracy: the fine-tuning's small R² loss costs calibration error
    where the metamodel's error dominates); returns its record with the plain net's test
    R² (raw units, per output index) for comparison, or None."""

    sc = settings(c.get("solvable"))
    if sc["enabled"] is False:
        return None

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=DTYPE)

    # the box the MILP searches, in standardised units: the range of all rows
    box_lo, box_hi = Xs.min(axis=0), Xs.max(axis=0)
    if sc["enabled"] == "auto":
        unstable0 = count_unstable(net, t(box_lo), t(box_hi))
        if unstable0 <= int(sc["min_unstable"]):
            log.info("solvable training skipped (enabled: auto): the plain net has %d "
                     "unstable neurons <= min_unstable %d; the MILP solves it as it is",
                     unstable0, int(sc["min_unstable"]))
            return None

    with torch.no_grad():
        plain_r2 = r2_scores(Y[te], net(t(Xs[te])).numpy() * y_std + y_mean)
    gen = torch.Generator().manual_seed(int_seed(seed, "metamodel", study, "solvable"))
    # dropout draws from torch's global generator, which torch seeds at random in every
    # process: seed it here (and restore it after), or two runs train different nets
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int_seed(seed, "metamodel", study, "solvable", "dropout"))
        new, rec = make_solvable(net, t(Xs[tr]), t(Ys[tr]), t(Xs[va]), t(Ys[va]), box_lo,
                                 box_hi, sc, c["loss"], int(c["batch_size"]), gen)
    net.load_state_dict(new.state_dict())
    rec["plain_test_r2"] = [float(v) for v in plain_r2]
    return rec
