"""Calibration strategies under a simulation budget (paper 1, "Methods").

For one target (observed or simulated outputs z at a context c) and a budget of r
simulation runs, every strategy returns one calibrated input vector x.  Each strategy
is one function registered with :func:`~.registry.strategy` in a module of this
package (``sampling``: rs; ``optimal``: op, stp, pts; ``adaptive``; ``blackbox``);
:func:`~.registry.registry` lists them (:func:`names` their names).
:mod:`.ledger` is what a strategy works with (one target's run: budget, sampling,
simulation, OP), :mod:`.runner` runs a strategy over a set of targets,
:mod:`.summary` tabulates the records.  :class:`~.settings.CalibrationSettings` is the
``calibration`` section built once (frozen, checked at construction): :func:`run_target`
takes it; :func:`calibrate_target` is the boundary for plain dicts from Python.
"""

from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.registry import StrategySpec, get, names, strategy
from simcalib.metamodel.strategies.runner import (
    calibrate,
    calibrate_target,
    compute_anchors,
    run_target,
)
from simcalib.metamodel.strategies.settings import CalibrationSettings
from simcalib.metamodel.strategies.summary import summarize, sweep_summary

__all__ = ["CalibrationSettings", "StrategySpec", "Target", "TargetRun", "calibrate",
           "calibrate_target", "compute_anchors", "get", "names", "run_target", "strategy",
           "summarize", "sweep_summary"]
