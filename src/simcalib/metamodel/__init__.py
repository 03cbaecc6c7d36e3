"""Paper 1: metamodel calibration.  Simulate a design, train a ReLU network
metamodel, embed it exactly in a MILP and solve for the inputs that minimise the
predicted error (Optimally-Predict), then spend a budget of simulator runs per
target with one of the calibration strategies.

Modules, one job each (shaped like :mod:`simcalib.bayes` and
:mod:`simcalib.multisource`):

* :mod:`~simcalib.metamodel.model` -- the ReLU metamodel (torch): training with
  scalers and per-output R², prediction, MC dropout, fine-tuning, files;
* :mod:`~simcalib.metamodel.milp` -- Optimally-Predict: bounds, formulations, HiGHS
  and Gurobi backends, warm starts, alternative optima;
* :mod:`~simcalib.metamodel.strategies` -- the calibration strategies under a budget:
  a registry (one module per strategy family), the per-target ledger, the runner,
  summaries;
* :mod:`~simcalib.metamodel.checks` -- config checks a schema cannot express;
* :mod:`~simcalib.metamodel.plots` -- the calibration figures.

Importing this package is light (no torch): the network is imported from
:mod:`simcalib.metamodel.model` where it is needed.
"""
