"""Process CPU of one ``gpbo`` step at n runs so far: the strategy's GP fit (SingleTaskGP,
exact marginal likelihood) and its LogEI optimisation (the schema defaults: 10 restarts,
512 raw samples, 1 torch thread), on a 2-input Rosenbrock misfit (-log Delta on n Sobol
points).  Why: a full GP-BO search to N = 1,024 costs the sum of these steps, far more
than the machine had to spare (issue 24's benchmark); timing single steps at a few n
gives the per-proposal cost and an estimate of the whole search without running it.

    python benchmarks/gpbo_step.py 128 256 512 1024
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def rosenbrock_misfit(U: np.ndarray) -> np.ndarray:
    """-log Delta of Rosenbrock (a = 10, b = 20, the study's box) against one target."""
    def f(V: np.ndarray) -> np.ndarray:
        x, y = 9 + 2 * V[:, 0], 95 + 10 * V[:, 1]
        return 20 * (y - x**2) ** 2 + (10 - x) ** 2
    z = f(np.array([[0.4, 0.6]]))[0]
    return -np.log(np.maximum(np.abs(f(U) - z) / 100.0, 1e-12))


def step_cpu(n: int) -> tuple[float, float]:
    """(fit, acquisition) process CPU seconds of one GP-BO step on n points."""
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    dt = torch.float64
    U = torch.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(n, dtype=dt)
    ty = torch.as_tensor(rosenbrock_misfit(U.numpy())[:, None], dtype=dt)
    c0 = time.process_time()
    model = SingleTaskGP(U, ty, outcome_transform=Standardize(m=1))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    c1 = time.process_time()
    bounds = torch.stack([torch.zeros(2, dtype=dt), torch.ones(2, dtype=dt)])
    optimize_acqf(LogExpectedImprovement(model, best_f=ty.max()), bounds=bounds, q=1,
                  num_restarts=10, raw_samples=512)
    return c1 - c0, time.process_time() - c1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="+", help="runs so far (GP training points)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)   # as gpbo.threads' default
    torch.manual_seed(0)
    for n in args.n:
        fit, acq = step_cpu(n)
        print(f"n = {n}: fit {fit:.2f} CPU-s, acquisition {acq:.2f} CPU-s, "
              f"step {fit + acq:.2f} CPU-s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
