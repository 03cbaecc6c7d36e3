"""``posterior``: r draws from the target's metamodel posterior, simulated, the best
kept: the run-based counterpart of "NPE + r posterior draws" (sbi's neural posterior
estimation, the peer this strategy is measured against in docs/posterior.md).

The posterior (:mod:`simcalib.metamodel.posterior`) spreads the r runs where the
metamodel *and its own error* say the calibrated inputs may lie, instead of a box of
fixed size around one OP point (PtS): a well-identified input gets a narrow spread,
an unidentified one its whole range.  A target's ``sd_``/``weight_`` columns enter as
an observation sd d_j / w_j (the same term as Delta's w_j |.| / d_j).  The error
scale kappa is ``posterior.error_scale``; in the workflow the job gets the one
cal-posterior calibrated for the study (``--posterior-meta``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy
from simcalib.seeds import int_seed


def posterior_draws(p: TargetRun, n: int) -> tuple[np.ndarray, Any]:
    """``n`` distinct posterior draws of ``p``'s target (fewer distinct ones are
    repeated) and the draws object (for diagnostics)."""
    from simcalib.metamodel.posterior import TargetSpec, run, settings
    from simcalib.metamodel.posterior.build import error_scale

    # one block of draws: r <= a few hundred picks need no more, and a strategy's
    # answer is judged by its runs, not by the chains (their diagnostics go to history)
    cfg = settings(p.settings.get("posterior"))
    cfg["max_draws"] = cfg["draws"]
    base = np.asarray(p.mm.y_std, dtype=float)
    w = p.target.weight
    observed = p.target.x_true is None
    obs_var = np.zeros(len(base)) if w is None else np.where(
        w > 0, (base / np.where(w > 0, w, 1.0)) ** 2, 0.0)
    weight = np.ones(len(base)) if w is None else (w > 0).astype(float)
    infer = w is None and (cfg["obs_noise"] == "infer"
                           or (cfg["obs_noise"] == "auto" and observed))
    kappa, _ = error_scale(p.space, p.mm, cfg, p.seed, None)
    spec = TargetSpec(p.target.target_id, dict(p.target.context), p.target.z, obs_var,
                      weight, bool(infer), kappa=kappa)
    draws = run(p.space, p.mm, [spec], cfg, p.seed, "strategy", p.study.name,
                p.target.target_id, warn=False)   # diagnostics go to the record's history
    X = draws.flat(0)
    uniq = np.unique(X, axis=0)
    r = np.random.default_rng(int_seed(p.seed, "posterior-pick", p.study.name,
                                       p.target.target_id))
    pool = uniq if len(uniq) >= n else X
    return pool[r.choice(len(pool), size=n, replace=len(pool) < n)], draws


@strategy("posterior", label="Posterior", order=70, reads=("budget", "posterior"),
          study_keys=(), default=False)
def strategy_posterior(p: TargetRun) -> dict[str, Any]:
    """r posterior draws simulated; the best by actual error."""
    X, draws = posterior_draws(p, p.budget)
    p.simulate(X, "posterior")
    x, e, status = choose(p, X[0])
    conv = bool(draws.converged[0])
    return {"x": x, "error": e, "status": status, "anchor": X[0],
            "anchor_kind": "posterior_draw",
            "history": f"converged:{int(conv)};r_hat_max:{float(np.nanmax(draws.r_hat)):.4f}"}
