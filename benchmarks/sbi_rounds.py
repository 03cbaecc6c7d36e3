"""sbi's multi-round neural posterior estimation as a peer of ``sequential`` on one
target: the same budget of simulator runs, spent in rounds, each round drawn from the
previous round's posterior given the observed data.

Two routes, the two a modeller with sbi would pick for one data set (Greenberg et al.
2019; Deistler et al. 2022):

* ``apt``: APT / SNPE-C (``sbi.inference.NPE_C``): every round's runs drawn from the
  current posterior, trained with the atomic loss that corrects for the proposal;
* ``tsnpe``: truncated sequential NPE (``sbi.inference.NPE`` with the first-round loss
  throughout): every round's runs drawn from the prior truncated to the current
  posterior's highest-density region (``RestrictedPrior`` +
  ``get_density_thresholder``, the 1e-4 quantile).

The parameters are the tunables on the unit box of the target's bounds (a uniform
prior, as ``sequential``'s Sobol start and GP-BO assume; integer inputs are cells of
equal width), the data the outputs divided by Delta's scale.  Failed runs are spent
and left out of training.  The answer, as for every run-based peer here, is the run
with the least Delta (the posterior itself is beside the point of this comparison:
``benchmarks/coverage.py`` scores sbi's posteriors).  Runs go through
:class:`~simcalib.metamodel.strategies.ledger.TargetRun`, so budget, Delta and failed
runs are counted exactly as for ``sequential``.

Needs the optional ``sbi`` extra (``pip install -e '.[sbi]'``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from simcalib.metamodel.strategies.ledger import TargetRun, output_scale
from simcalib.seeds import int_seed

log = logging.getLogger("sequential.sbi")
#: sbi's training logs (tensorboard) go under results/ (git-ignored), not into the cwd
LOGS = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "sbi-logs"

#: the routes this module runs
SBI_METHODS = ("apt", "tsnpe")
#: samples that estimate the truncation's density threshold (sbi's default is 1e6:
#: ~10x slower on 2 cores for a threshold that a 1e5 sample pins to its 1e-4 quantile)
SUPPORT_SAMPLES = 100_000


def _row_bounds(p: TargetRun, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The target's bounds repeated for ``n`` rows (the space's maps take per-row ones)."""
    lo, hi = p.bounds()
    return np.broadcast_to(lo, (n, len(lo))), np.broadcast_to(hi, (n, len(hi)))


def to_unit(p: TargetRun, X: np.ndarray) -> np.ndarray:
    """Tunables to the unit box of the target's bounds (log-aware; integer cell
    centres), the inverse of :func:`from_unit`."""
    return p.space.unit_of(X, *_row_bounds(p, len(X)))


def from_unit(p: TargetRun, U: np.ndarray) -> np.ndarray:
    """Unit-box points (n, d) to tunables inside the target's bounds."""
    return p.space._map_unit(np.clip(U, 0.0, 1.0 - 1e-12), *_row_bounds(p, len(U)))


def run_rounds(p: TargetRun, method: str, rounds: int, seed: int) -> dict[str, Any]:
    """Spend ``p.budget`` runs in ``rounds`` rounds of ``method`` (``apt`` or
    ``tsnpe``); the runs land in ``p.runs``.  Returns the training CPU seconds and the
    rounds actually run."""
    import torch
    from sbi.inference import NPE, NPE_C
    from sbi.utils import BoxUniform, RestrictedPrior, get_density_thresholder
    from torch.utils.tensorboard import SummaryWriter

    if method not in SBI_METHODS:
        raise ValueError(f"unknown sbi route {method!r}; one of {SBI_METHODS}")
    d = len(p.space.tunable_names)
    torch.manual_seed(int_seed(seed, "sbi", method, p.study.name, p.target.target_id))
    torch.set_num_threads(1)   # a shared 2-core machine: more threads only contend
    prior = BoxUniform(torch.zeros(d), torch.ones(d))
    base = output_scale(p.mm)
    x_o = torch.tensor(np.asarray(p.target.z, float) / base, dtype=torch.float32)
    writer = SummaryWriter(log_dir=str(LOGS / f"{p.study.name}_{seed}_{method}_"
                                            f"{p.target.target_id}"))
    inf = (NPE_C if method == "apt" else NPE)(prior=prior, show_progress_bars=False,
                                               logging_level="ERROR", summary_writer=writer)
    proposal: Any = prior
    sizes = [p.budget // rounds + (1 if k < p.budget % rounds else 0) for k in range(rounds)]
    train_cpu = 0.0
    done = 0
    for k, n in enumerate(s for s in sizes if s > 0):
        theta = (proposal.sample((n,)) if proposal is prior else
                 proposal.sample((n,), show_progress_bars=False))
        U = theta.detach().cpu().numpy().astype(float)
        errs = p.simulate(from_unit(p, U), method)
        Y = np.array([r["y"] for r in p.runs[-n:]], dtype=float)
        ok = np.isfinite(errs) & np.isfinite(Y).all(axis=1)
        done = k + 1
        if k == len(sizes) - 1 or not ok.any():
            # the last round's runs are only scored (a posterior after them would
            # propose nothing more); a round without a finished run cannot train
            if not ok.any():
                log.warning("%s target %d round %d: no run finished, nothing to train on",
                            method, p.target.target_id, k + 1)
            continue
        th = torch.tensor(U[ok], dtype=torch.float32)
        xs = torch.tensor(Y[ok] / base, dtype=torch.float32)
        t0 = time.process_time()
        if method == "apt":
            inf.append_simulations(th, xs, proposal=proposal)
            est = inf.train(show_train_summary=False)
            proposal = inf.build_posterior(est).set_default_x(x_o)
        else:
            inf.append_simulations(th, xs)
            est = inf.train(force_first_round_loss=True, show_train_summary=False)
            post = inf.build_posterior(est).set_default_x(x_o)
            keep = get_density_thresholder(post, quantile=1e-4,
                                           num_samples_to_estimate_support=SUPPORT_SAMPLES)
            proposal = RestrictedPrior(prior, keep, sample_with="rejection")
        train_cpu += time.process_time() - t0
    return {"train_cpu_s": train_cpu, "rounds": done}
