"""``blackbox``: Optuna TPE (seeded) on the actual error, r trials: what Covasim and
Starsim users do today, and the no-metamodel baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy
from simcalib.seeds import int_seed


@strategy("blackbox", label="blackbox", order=60, reads=("budget", "blackbox"))
def strategy_blackbox(p: TargetRun) -> dict[str, Any]:
    """Optuna TPE on the actual error, exactly ``budget`` simulator runs.  Proposals
    that break a linear constraint are told as failed without a run (no budget used);
    after 20 x budget such proposals the rest is filled with uniform feasible points."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    b = p.settings["blackbox"]
    sampler = optuna.samplers.TPESampler(
        seed=int_seed(p.seed, "blackbox", p.study.name, p.target.target_id) % (2**32),
        n_startup_trials=int(b["n_startup_trials"]), multivariate=bool(b["multivariate"]))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    lo, hi = p.bounds()
    params = p.space.parameters
    first = None
    rejected = 0
    while p.left > 0 and rejected < 20 * p.budget:
        trial = study.ask()
        x = np.empty(len(params))
        for j, par in enumerate(params):
            if par.integer:
                x[j] = trial.suggest_int(par.name, int(np.ceil(lo[j] - 1e-9)),
                                         int(np.floor(hi[j] + 1e-9)))
            else:
                x[j] = trial.suggest_float(par.name, float(lo[j]), float(hi[j]), log=par.log)
        if p.space.constraints and not p.space.feasible(p.frame(x[None, :]))[0]:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            rejected += 1
            continue
        e = p.simulate(x[None, :], "tpe")[0]
        first = x if first is None else first
        if np.isfinite(e):
            study.tell(trial, float(e))
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    if p.left > 0:
        p.simulate(p.sample(p.left, p.bounds()), "fill")
    first = first if first is not None else p.runs[0]["x"]
    x, e, status = choose(p, first)
    return {"x": x, "error": e, "status": status, "anchor": first,
            "anchor_kind": "first_trial"}

