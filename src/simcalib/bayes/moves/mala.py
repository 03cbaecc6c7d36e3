"""Metropolis-adjusted Langevin proposals (``theta_kernel: mala``).

One leapfrog step of :class:`~simcalib.bayes.moves.hmc.Hamiltonian` (a half kick,
a drift, a half kick; the same Metropolis test), the step scale tuned towards the
57.4 % acceptance that is optimal for MALA (Roberts & Rosenthal 1998) and never
jittered (a single step cannot resonate with the posterior).
"""

from __future__ import annotations

from simcalib.bayes.moves.base import TARGET_ACCEPT
from simcalib.bayes.moves.hmc import Hamiltonian


class Langevin(Hamiltonian):
    name = "mala"
    target_accept = TARGET_ACCEPT["mala"]

    def __init__(self, reflect: bool = False) -> None:
        super().__init__(1, reflect)
