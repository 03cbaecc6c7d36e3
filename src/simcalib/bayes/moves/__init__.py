"""Proposal kernels ("moves") of the lock-step sampler's theta block, one module each.

As emcee keeps its moves: every kernel is a small object with one method,
``propose(run) -> (proposed states, accepted lanes)``, that reads the run's current
states, adapted proposal shape and scale and random streams, and leaves accepting to
the run.  The block is ``(u, log gamma, log ell)`` (theta on its sampling scale), and
for the gradient kernels also ``log sigma^2`` (on the marginal with delta integrated
out); delta and, for the random walk, sigma^2 get exact Gibbs draws after the move
(:mod:`simcalib.bayes.gibbs`).

* :mod:`~simcalib.bayes.moves.random_walk`: adaptive random-walk Metropolis
  (``theta_kernel: mwg``, the paper's Algorithm 1);
* :mod:`~simcalib.bayes.moves.hmc`: Hamiltonian proposals from the sensitivities'
  gradient (``theta_kernel: hmc``, ``leapfrog_steps``), whose trajectories are
  rejected at theta's bounds or bounce off them (:mod:`~simcalib.bayes.moves.reflect`);
* :mod:`~simcalib.bayes.moves.mala`: Langevin proposals, HMC with one leapfrog step
  (``theta_kernel: mala``).
"""

from __future__ import annotations

from simcalib.bayes.moves.base import TARGET_ACCEPT, Move
from simcalib.bayes.moves.hmc import Hamiltonian
from simcalib.bayes.moves.mala import Langevin
from simcalib.bayes.moves.random_walk import RandomWalk

__all__ = ["TARGET_ACCEPT", "Hamiltonian", "Langevin", "Move", "RandomWalk", "make_move"]


def make_move(kernel: str, steps: int, reflect: bool) -> Move:
    """The move of ``theta_kernel`` (``steps``: ``leapfrog_steps`` for hmc; ``reflect``:
    bounce off theta's bounds, gradient kernels on the linear scale only)."""
    if kernel == "mwg":
        return RandomWalk()
    if kernel == "mala":
        return Langevin(reflect)
    if kernel == "hmc":
        return Hamiltonian(steps, reflect)
    raise ValueError(f"unknown theta_kernel {kernel!r}; one of {sorted(TARGET_ACCEPT)}")
