"""``adaptive``: the paper's "future work" as a strategy.  The r runs go in rounds;
after each round the metamodel is corrected on the target's own runs (a local output
offset, optionally fine-tuning the network), OP is re-solved in a trust region around
the best run so far, and the region grows on progress at its edge and shrinks without
progress; after rounds in which every run failed it searches the whole space and
never re-runs a failed OP point.  See docs/strategies.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy
from simcalib.seeds import int_seed


def check_adaptive(settings: Mapping[str, Any], key: str) -> None:
    """The trust region's settings (also when the strategy is called from Python)."""
    a = settings["adaptive"]
    if int(a["rounds"]) < 1:
        raise ConfigError(f"{key}.adaptive.rounds", "must be >= 1")
    if not 0 < float(a["shrink"]) <= 1 or float(a["grow"]) < 1:
        raise ConfigError(f"{key}.adaptive", "need 0 < shrink <= 1 <= grow")
    if not 0 < float(a["min_proximity"]) <= 1:
        raise ConfigError(f"{key}.adaptive.min_proximity", "must lie in (0, 1]")
    if a["update"] not in ("offset", "fine_tune", "both", "none"):
        raise ConfigError(f"{key}.adaptive.update",
                          "use one of offset, fine_tune, both, none")


def round_sizes(budget: int, rounds: int, min_size: int = 1) -> list[int]:
    """Split the budget into ``rounds`` near-equal parts (earlier rounds larger); a
    budget too small for ``rounds`` parts of ``min_size`` runs gets fewer parts."""
    rounds = max(1, min(rounds, budget // max(1, min_size)))
    base, extra = divmod(budget, rounds)
    return [base + (i < extra) for i in range(rounds)]


def _local_offset(p: TargetRun, centre: np.ndarray, mm: Any, k: int) -> np.ndarray:
    """Median residual S - M over the ``k`` successful runs nearest to ``centre``
    (unit-scaled distance): the metamodel's local bias, in raw output units."""
    ok = [r for r in p.runs if np.isfinite(r["error"])]
    if not ok:
        return np.zeros(len(p.out_names))
    X = np.array([r["x"] for r in ok])
    Y = np.array([r["y"] for r in ok])
    d = np.linalg.norm(p.space.to_unit(X) - p.space.to_unit(centre), axis=1)
    idx = np.argsort(d)[: max(1, k)]
    return np.median(Y[idx] - p._predict_with(mm, X[idx]), axis=0)


def _fine_tuned(p: TargetRun, mm: Any) -> Any:
    """Fine-tune a copy of the metamodel on this target's successful runs."""
    from simcalib.metamodel.training import fine_tune

    ok = [r for r in p.runs if np.isfinite(r["error"])]
    if not ok:
        return mm
    df = p.frame(np.array([r["x"] for r in ok]))
    for j, name in enumerate(p.out_names):
        df[name] = [r["y"][j] for r in ok]
    cfg = dict(p.settings.get("metamodel") or {})
    return fine_tune(mm, df, cfg, int_seed(p.seed, "calibrate-ft", p.study.name,
                                           p.target.target_id, len(ok)),
                     epochs=int(p.settings["adaptive"]["epochs"]))


def at_region_edge(x: np.ndarray, box: tuple[np.ndarray, np.ndarray],
                   bounds: tuple[np.ndarray, np.ndarray], margin: float = 0.1,
                   integer: np.ndarray | None = None) -> bool:
    """Whether ``x`` lies in the outer ``margin`` of the trust region ``box`` on a side
    the optimum could lie beyond.  A side that is the input's global bound does not
    count (nothing lies outside it), nor does an input the box pins to one value, nor
    an ``integer`` input whose box is only the anchor and its two neighbours (the
    floor of :meth:`Space.proximity_box`): the next round's box is centred on the best
    run and so moves such an input on by itself; counting it would grow the region
    after every integer step."""
    lo, hi = box
    glo, ghi = bounds
    free = hi > lo
    if integer is not None:
        free &= ~(np.asarray(integer, dtype=bool) & (hi - lo <= 2 + 1e-9))
    span = np.where(free, hi - lo, 1.0)
    u = (np.asarray(x, dtype=float) - lo) / span
    low_side = free & (u < margin) & (lo > glo + 1e-12)
    high_side = free & (u > 1 - margin) & (hi < ghi - 1e-12)
    return bool(np.any(low_side | high_side))


def _failed_before(p: TargetRun, x: np.ndarray) -> bool:
    """Whether a run at ``x`` (tunables) already failed for this target."""
    return any(not np.isfinite(r["error"]) and np.allclose(r["x"], x, rtol=0, atol=1e-9)
               for r in p.runs)


@strategy("adaptive", label="Adaptive", order=50, min_budget=2,
          reads=("budget", "proximity", "adaptive"), study_keys=("metamodel",),
          uses_anchor=True, check=check_adaptive)
def strategy_adaptive(p: TargetRun) -> dict[str, Any]:
    """Multi-round PtS with a corrected metamodel and a trust region (see module doc)."""
    a = p.settings["adaptive"]
    # two runs a round at least (the corrected OP point and one sample)
    sizes = round_sizes(p.budget, int(a["rounds"]), min_size=2)
    radius = float(p.proximity)
    op0 = p.full_op()
    anchor = op0
    mm = p.mm
    shift = np.zeros(len(p.out_names))
    history = []
    best_err = np.inf
    for k, n_k in enumerate(sizes):
        box = p.box(anchor, radius)
        if k == 0:
            # the OP point itself is run first: PtS never scores its anchor, but the
            # residual there is the most useful datum for the correction below
            X = np.vstack([op0[None, :], p.sample(n_k - 1, box)])
        else:
            x_op = p.op(box, f"adaptive{k}", mm=mm, shift=shift)
            if _failed_before(p, x_op):   # the same point again would fail again
                x_op = p.sample(1, box)[0]
            X = np.vstack([x_op[None, :], p.sample(n_k - 1, box)])
        p.simulate(X, f"round{k}")
        best = p.best_run()
        improved = best is not None and best["error"] < best_err - 1e-12
        if best is not None:
            # grow when the best point sits at the edge of the region (the optimum may
            # lie outside), keep it on interior progress, shrink when nothing improved
            if improved and at_region_edge(best["x"], box, p.bounds(),
                                                     integer=p.space.integer_mask):
                radius = min(1.0, radius * float(a["grow"]))
            elif not improved:
                radius = max(float(a["min_proximity"]), radius * float(a["shrink"]))
            best_err = min(best_err, best["error"])
            anchor = best["x"]
        else:
            # every run so far failed: the anchor's neighbourhood is where the simulator
            # fails and tells nothing about where to go, so the next round draws from the
            # whole space instead of spending its runs there too
            radius = 1.0
        history.append(f"{k}:{n_k}:{radius:.4g}:{best_err:.4g}")
        if k + 1 < len(sizes) and best is not None:
            if a["update"] in ("fine_tune", "both"):
                mm = _fine_tuned(p, p.mm)
            if a["update"] in ("offset", "both"):
                shift = _local_offset(p, anchor, mm, int(a["neighbours"]))
    x, e, status = choose(p, op0)
    return {"x": x, "error": e, "status": status, "anchor": op0, "anchor_kind": "op",
            "history": " ".join(history)}

