"""The protocol every move follows, and the acceptance targets of the kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from simcalib.bayes.chains import LockstepRun
    from simcalib.bayes.state import LaneState

#: acceptance rates the step scale adapts towards: optimal scaling of random-walk
#: Metropolis (Roberts et al. 1997), MALA (Roberts & Rosenthal 1998), and the usual
#: target for short HMC trajectories
TARGET_ACCEPT = {"mwg": 0.234, "mala": 0.574, "hmc": 0.7}


class Move(Protocol):
    """One proposal of the block for every lane, with its Metropolis test."""

    #: ``theta_kernel`` name
    name: str
    #: leapfrog steps per proposal (0: no gradient needed)
    steps: int
    #: acceptance rate the step scale is tuned towards during adaptation
    target_accept: float

    def propose(self, run: LockstepRun) -> tuple[LaneState, np.ndarray]:
        """Proposed states of every lane and the lanes whose proposal is accepted."""
        ...
