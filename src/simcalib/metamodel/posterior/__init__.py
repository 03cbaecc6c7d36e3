"""A posterior over the calibrated inputs of every target, from the metamodel.

p(x | z) is proportional to prior(x) N(z; M(x), Sigma): :mod:`.noise` says what goes
into Sigma (observation sd, the metamodel's held-out error, an inferred scale),
:mod:`.density` the prior and likelihood on the sampler's coordinates, :mod:`.sampler`
samples all targets at once with R-hat and bulk ESS per input, :mod:`.build` goes from
a targets table to draws, :mod:`.summary` writes tables and netCDF, :mod:`.plots` the
figures, :mod:`.check` the posterior-predictive check.  :mod:`.sequential` is the
posterior of the ``sequential`` strategy from its own runs (an ensemble refitted on
them, :mod:`.emulator`); :mod:`.agreement` checks an answer against its posterior.
docs/posterior.md.
"""

from simcalib.metamodel.posterior.build import build, run, settings, target_specs
from simcalib.metamodel.posterior.density import Posterior, TargetSpec
from simcalib.metamodel.posterior.sampler import Draws, sample
from simcalib.metamodel.posterior.sequential import SequentialPosterior, sequential_posterior

__all__ = ["Draws", "Posterior", "SequentialPosterior", "TargetSpec", "build", "run", "sample",
           "sequential_posterior", "settings", "target_specs"]
