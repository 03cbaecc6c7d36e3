"""The ``sequential`` search as steps: the start, then rounds of proposals.

Why steps: a round's runs are what costs (minutes to hours each), and on a cluster
they should run as jobs of their own.  So the search is a small state machine that
never simulates itself: :meth:`Search.start` and :meth:`Search.propose` return the
rows to run, the caller runs them (in this process, :func:`run_here`; or as Snakemake
jobs, :mod:`simcalib.metamodel.strategies.rounds`) and enters them into the ledgers,
and :meth:`Search.after_round` takes the round's stock.  :meth:`Search.state` /
:meth:`Search.restore` carry everything the next step needs (the ledgers' runs and
random streams, the ensemble's weights, the proposal counters), exactly, so a search
cut into jobs makes the same runs, bit for bit, as one job.

Every random stream is the one the one-job search always used (seeded from
(seed, study, target)); every fit seeds itself from its round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.metamodel.strategies.ledger import TargetRun, op_unproven
from simcalib.metamodel.strategies.proposals import adopt_design, propose_for
from simcalib.progress import eta
from simcalib.seeds import int_seed, rng

#: the round lines keep the strategy's logger name (log readers, benchmarks/sequential.py)
log = logging.getLogger("simcalib.metamodel.strategies.sequential")


def usable(r: Mapping[str, Any]) -> bool:
    return r["status"] == "ok" and bool(np.isfinite(r["y"]).all())


class Pool:
    """Every run of every target in one search, seen from one target: the runs at its
    context (whoever paid for them) with this target's Delta."""

    def __init__(self, ps: list[TargetRun]) -> None:
        self.ps = ps

    def runs(self, p: TargetRun) -> list[dict[str, Any]]:
        out = []
        for q in self.ps:
            if q.target.context != p.target.context:
                continue
            for r in q.runs:
                e = float(p.err(r["y"])[0]) if usable(r) else np.inf
                out.append({**r, "error": e, "owner": q.target.target_id})
        return out

    def best(self, p: TargetRun) -> dict[str, Any] | None:
        ok = [r for r in self.runs(p) if np.isfinite(r["error"])]
        return min(ok, key=lambda r: r["error"]) if ok else None

    @property
    def used(self) -> int:
        return sum(q.used for q in self.ps)

    @property
    def budget(self) -> int:
        return sum(q.budget for q in self.ps)


def initial_runs(budget: int, n_tunables: int, per_input: int) -> int:
    """Size of the Sobol start: ``per_input`` runs per tunable, at most half the
    budget, at least 2 (and never the whole budget)."""
    return max(min(2, budget), min(per_input * n_tunables, max(2, budget // 2), budget))


#: points the start repeats (fresh seeds) on a simulator known stochastic: two pairs,
#: the fewest a curve's noise ceiling and its basis cut by that ceiling take
#: (:func:`simcalib.metamodel.curves.weight_ceilings`); the posterior's run-to-run
#: noise term (:mod:`simcalib.metamodel.posterior.sequential`) then has 2 degrees of
#: freedom per output.  Each costs one start point, never a run beyond the budget.
STOCHASTIC_REPEATS = 2

#: rows to simulate: target id -> (inputs (n, tunables), phase)
Proposals = dict[int, tuple[np.ndarray, str]]


class Search:
    """One sequential search over the targets ``ps`` of a job (module doc)."""

    def __init__(self, ps: list[TargetRun]) -> None:
        self.ps = ps
        self.p0 = ps[0]
        self.s = self.p0.settings["sequential"]
        self.pool = Pool(ps)
        self.round = 0            # proposal rounds made so far
        self.started = False
        self.ens: Any = None
        self.made = {p.target.target_id: 0 for p in ps}
        self.rngs = {p.target.target_id: rng(p.seed, "sequential-ts", p.study.name,
                                             p.target.target_id) for p in ps}
        self.traj: list[dict[int, str]] = []
        self.fm_info: dict[str, Any] | None = None
        #: (target id, run index, run index) of each of the start's repeated points:
        #: one when the config does not say whether the simulator is stochastic (to find
        #: out), :data:`STOCHASTIC_REPEATS` when it says stochastic (to measure the
        #: noise), none when it says deterministic (:meth:`_repeats`)
        self.repeats: list[tuple[int, int, int]] = []
        #: what the repeats showed (or, declared stochastic, measured):
        #: {"stochastic": bool | None, "evidence": str}, else None
        self.noise: dict[str, Any] | None = None
        self._t0 = time.perf_counter()
        self._used0 = 0

    # ---- the start ------------------------------------------------------------
    def start(self) -> Proposals:
        """Adopt the study's design runs (``use_design``) or draw the Sobol start, one
        per context, split among the targets there in turn."""
        self.started = True
        s, d = self.s, len(self.p0.space.tunable_names)
        groups: dict[tuple[tuple[str, float], ...], list[TargetRun]] = {}
        for p in self.ps:
            groups.setdefault(tuple(sorted(p.target.context.items())), []).append(p)
        out: Proposals = {}
        for grp in groups.values():
            if s["use_design"] and adopt_design(grp):
                continue
            n0 = initial_runs(sum(q.budget for q in grp), d, int(s["initial_per_input"]))
            n0 = min(n0, sum(q.budget // 2 if q.budget >= 4 else q.budget for q in grp)) or n0
            first = grp[0]
            start = first.space.sample_tunables(n0, rng(first.seed, "sequential-sobol",
                                                        first.study.name,
                                                        first.target.target_id),
                                                "sobol", first.target.context)
            X = start[first.space.tunable_names].to_numpy(dtype=float)
            for j, q in enumerate(grp):
                mine = X[j::len(grp)][: q.left]
                k = 0 if self.repeats else self._repeats(len(mine))
                if k:
                    # the start's last k points repeat its first k (fresh seeds: their
                    # run ids): different outputs show a stochastic simulator, and
                    # their differences measure its run-to-run noise
                    n = len(mine)
                    mine = np.vstack([mine[:-k], mine[:k]])
                    self.repeats = [(q.target.target_id, q.used + i, q.used + n - k + i)
                                    for i in range(k)]
                if len(mine):
                    out[q.target.target_id] = (mine, "sobol")
        return out

    def _known(self) -> bool | None:
        """Whether the config says the simulator is stochastic (``noise.stochastic``, or
        a built-in's options); None when it leaves it open."""
        from simcalib.study.noise import known_stochastic

        return known_stochastic(self.p0.study.cfg)

    def deterministic(self) -> bool:
        """Whether the simulator is known (config) or found (the start's repeated
        point gave the same outputs) deterministic; False while unknown."""
        known = self._known()
        if known is not None:
            return not known
        return bool(self.noise) and self.noise.get("stochastic") is False

    def _repeats(self, n: int) -> int:
        """How many of a start of ``n`` points are repeated: none on a simulator known
        deterministic (a repeat would show nothing); one where stochasticity is
        undeclared (to find out); on one known stochastic :data:`STOCHASTIC_REPEATS`
        (at most half the start), whose pairs measure the run-to-run noise."""
        known = self._known()
        if known is False or n < 2:
            return 0
        return 1 if known is None else min(STOCHASTIC_REPEATS, n // 2)

    def _detect_noise(self) -> None:
        """Compare the start's repeated points' runs (module doc of
        :mod:`simcalib.study.noise`): logged, and recorded in each target's record."""
        if not self.repeats:
            return
        if self._known():
            self._measure_noise()
            return
        tid, i, j = self.repeats[0]
        p = next(q for q in self.ps if q.target.target_id == tid)
        a, b = p.runs[i], p.runs[j]
        if not (usable(a) and usable(b)):
            self.noise = {"stochastic": None, "evidence": "the start's repeated point "
                          "failed: stochastic unknown (taken as deterministic)"}
        else:
            diff = np.abs(np.asarray(a["y"]) - np.asarray(b["y"]))
            sto = bool((diff > 0).any())
            pairs = ", ".join(f"{o} {ya:.6g} vs {yb:.6g}" for o, ya, yb in
                              zip(self.p0.out_names, a["y"], b["y"], strict=True))
            self.noise = {"stochastic": sto, "evidence":
                          f"detected {'stochastic' if sto else 'deterministic'}: runs "
                          f"{a['run_id']} and {b['run_id']} of target {tid} at the same "
                          f"inputs, different seeds: {pairs}"}
        log.info("%s sequential: the simulator is %s", self.p0.study.name,
                 self.noise["evidence"])

    def _measure_noise(self) -> None:
        """A simulator declared (or known) stochastic: the run-to-run noise sd per
        output from the start's repeated points (half the mean square of a pair's
        difference, as the noise probe's), logged and recorded.  Equal outputs at
        every pair are said too: the simulator probably ignores its seed."""
        tid = self.repeats[0][0]
        p = next(q for q in self.ps if q.target.target_id == tid)
        pairs = [(p.runs[i], p.runs[j]) for _, i, j in self.repeats]
        ok = [(a, b) for a, b in pairs if usable(a) and usable(b)]
        ids = ", ".join(f"{a['run_id']} and {b['run_id']}" for a, b in pairs)
        cfg = self.p0.study.cfg
        said = ("declared" if isinstance((cfg.get("noise") or {}).get("stochastic"), bool)
                else f"known (built-in {(cfg.get('simulator') or {}).get('type')})")
        if not ok:
            ev = (f"{said} stochastic; the start's repeated points (runs {ids} of target "
                  f"{tid}) failed: run-to-run noise not measured")
        else:
            d = np.array([np.asarray(a["y"]) - np.asarray(b["y"]) for a, b in ok])
            sd = np.sqrt((d ** 2).mean(axis=0) / 2.0)
            ev = (f"{said} stochastic; run-to-run noise sd from {len(ok)} repeated "
                  f"point(s) (runs {ids} of target {tid}): " + self._sd_words(sd))
            if not (sd > 0).any():
                ev += (" (equal outputs at the same inputs: does the simulator use its "
                       "seed?)")
        self.noise = {"stochastic": True, "evidence": ev}
        log.info("%s sequential: the simulator is %s", self.p0.study.name, ev)

    def _sd_words(self, sd: np.ndarray) -> str:
        """Each scalar output's sd, and each series' root mean square over its points
        (a curve of 40 points in one phrase)."""
        from simcalib.metamodel.curves import series_groups

        names = self.p0.out_names
        scalars, groups = series_groups(names)
        words = [f"{names[j]} {sd[j]:.4g}" for j in scalars]
        words += [f"{g} (rms over its {len(idx)} points) "
                  f"{float(np.sqrt(np.mean(sd[idx] ** 2))):.4g}" for g, idx in groups.items()]
        return ", ".join(words)

    # ---- after each round's runs are in ----------------------------------------
    def after_round(self) -> None:
        """The round's stock: the scale (first time, for a study without a
        metamodel), each target's best, the trajectory point and the log line."""
        if not self.traj:
            self._settle_scale()
            self._detect_noise()
            self._t0, self._used0 = time.perf_counter(), self.pool.used
        best = {p.target.target_id: self.pool.best(p) for p in self.ps}
        self.traj.append({tid: f"{self.pool.used}:{b['error']:.4g}" if b else
                          f"{self.pool.used}:nan" for tid, b in best.items()})
        if self.ens is None or len(self.traj) == 1:
            return
        bests = [b["error"] for b in best.values() if b is not None]
        info = self.ens.info
        unproven, solves = self.op_counts()
        log.info("%s sequential round %d: %d/%d runs (%d targets), best Delta %s, ensemble "
                 "OOB R2 min %s%s; proposal MILPs stopped unproven so far: %d of %d%s; %s",
                 self.p0.study.name, self.round, self.pool.used, self.pool.budget,
                 len(self.ps), f"{bests[0]:.4g}" if len(bests) == 1 else
                 (f"median {np.median(bests):.4g}" if bests else "n/a"),
                 f"{info['min_oob_r2']:.3f}" if info.get("min_oob_r2") is not None else "n/a",
                 f", failure classifier on ({self.fm_info['failed']} failed runs)"
                 if self.fm_info else "", unproven, solves,
                 f" (the {len(self.ps)} targets' records summed)" if len(self.ps) > 1 else "",
                 eta(time.perf_counter() - self._t0, self.pool.used - self._used0,
                     self.pool.budget - self._used0))

    def op_counts(self) -> tuple[int, int]:
        """(OP solves stopped unproven, OP solves) of every target so far: the records'
        ``op_unproven`` and ``op_solves`` summed (the same calls, counted by the same
        rule: :func:`~simcalib.metamodel.strategies.ledger.op_unproven`).  Every
        solve of the search is a target's :meth:`TargetRun.op` call, recorded in its
        ``op_calls``: the members' and the ensemble mean's proposal MILPs alike; bound
        tightening is part of a solve (a capped or time-limited one leaves valid
        bounds, not an unproven solve), and the answer needs no solve."""
        return (sum(op_unproven(p.op_calls) for p in self.ps),
                sum(c["label"] != "anchor" for p in self.ps for c in p.op_calls))

    def _settle_scale(self) -> None:
        """A study without a metamodel: Delta's scale from the start runs (module
        :mod:`.scale`), the same for every target; logged with its source."""
        mm = self.p0.mm
        if not getattr(mm, "pending", False):
            return
        old = np.asarray(mm.y_std, dtype=float).copy()
        Y = np.array([r["y"] for p in self.ps for r in p.runs if usable(r)])
        mm.settle(Y.reshape(-1, len(self.p0.out_names)))
        for p in self.ps:
            p.rescale(old)
        log.info("%s sequential: Delta's scale (no metamodel): %s: %s", self.p0.study.name,
                 mm.source, ", ".join(f"{o} {v:.4g}" for o, v in
                                      zip(self.p0.out_names, mm.y_std, strict=True)))

    # ---- rounds ---------------------------------------------------------------
    def active(self) -> bool:
        return any(p.left > 0 for p in self.ps)

    def propose(self) -> Proposals:
        """The next round's proposals (fit + MILPs; nothing simulated): every target
        with runs left gets its share of ``batch``."""
        import torch

        from simcalib.metamodel.failure import fit_failure

        ps, k = self.ps, self.round
        active = [p for p in ps if p.left > 0]
        share = max(1, int(self.s["batch"]) // max(1, len(active)))
        out: Proposals = {}
        old = torch.get_num_threads()
        try:
            if sum(usable(r) for q in ps for r in q.runs) < 4:
                # nothing to learn from yet: random points
                for p in active:
                    out[p.target.target_id] = (p.sample(min(share, p.left), p.bounds()),
                                               f"round{k}")
            else:
                self.ens = self._fit(k, self.ens)
                X, ok = self._failure_data()
                fm = fit_failure(X, ok, list(self.p0.study.input_names), self._failure_cfg(),
                                 seed=int_seed(self.p0.seed, "sequential-failure",
                                               self.p0.study.name,
                                               self.p0.target.target_id), tag=k)
                self.fm_info = fm.info if fm is not None else None
                mean_mm = (self.ens.mean_metamodel(self._settings().members)
                           if int(self.s["mean_proposals"]) else None)
                for p in active:
                    b = min(share, p.left)
                    tid = p.target.target_id
                    out[tid] = (propose_for(p, self, mean_mm, fm, b), f"round{k}")
                    self.made[tid] += b
        finally:
            torch.set_num_threads(old)
        self.round += 1
        return out

    def _failure_cfg(self) -> dict[str, Any]:
        return dict((self.p0.study.cfg.get("metamodel") or {}).get("failure") or {})

    def _failure_data(self) -> tuple[np.ndarray, np.ndarray]:
        """Every run so far with its success flag, and the study's simulated design
        runs when the job was given them (``use_design`` or not: a region the design
        found failing need not be walked into again)."""
        names = list(self.p0.study.input_names)
        X = [self._inputs(q, q.runs) for q in self.ps if q.runs]
        ok = [np.array([r["status"] == "ok" for r in q.runs]) for q in self.ps if q.runs]
        D = self.p0.given
        if D is not None and not self.s["use_design"] and len(D):
            X.append(D[names].to_numpy(dtype=float))
            ok.append((D["status"].astype(str) == "ok").to_numpy())
        return np.vstack(X), np.concatenate(ok)

    def _inputs(self, q: TargetRun, runs: list[dict[str, Any]]) -> np.ndarray:
        names = list(self.p0.study.input_names)
        return q.frame(np.array([r["x"] for r in runs]))[names].to_numpy(dtype=float)

    def _settings(self) -> Any:
        from simcalib.metamodel.ensemble import EnsembleSettings

        return EnsembleSettings.from_config(self.s.get("ensemble"))

    def _fit(self, tag: int | str, warm: Any) -> Any:
        from simcalib.metamodel.ensemble import fit_ensemble

        p0 = self.p0
        es = self._settings().for_batch(int(self.s["batch"]) - int(self.s["mean_proposals"]))
        ok = [[r for r in q.runs if usable(r)] for q in self.ps]
        X = np.vstack([self._inputs(q, rs) for q, rs in zip(self.ps, ok, strict=True) if rs])
        Y = np.array([r["y"] for rs in ok for r in rs])
        return fit_ensemble(X, Y, list(p0.study.input_names), p0.out_names, es,
                            seed=int_seed(p0.seed, "sequential", p0.study.name,
                                          p0.target.target_id),
                            tag=tag, warm=warm, study=p0.study.name,
                            series=(p0.study.cfg.get("metamodel") or {}).get("series"))

    def finish(self, refit: bool) -> Any:
        """The last ensemble; ``refit``: once more on every run (``final: ensemble``
        judges the answer with the last round's runs too; the runs do not change)."""
        if refit and sum(usable(r) for q in self.ps for r in q.runs) >= 4:
            self.ens = self._fit("final", self.ens)
        return self.ens

    # ---- state between jobs ----------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything the next step needs, exactly (pickled between jobs)."""
        return {
            "round": self.round, "started": self.started, "made": dict(self.made),
            "rngs": {t: r.bit_generator.state for t, r in self.rngs.items()},
            "traj": list(self.traj), "fm_info": self.fm_info,
            "repeats": list(self.repeats), "noise": self.noise,
            "ens": self.ens.state() if self.ens is not None else None,
            "scale": (np.asarray(self.p0.mm.y_std).copy(), getattr(self.p0.mm, "source", None)),
            "targets": {p.target.target_id: {
                "runs": p.runs, "op_calls": p.op_calls, "rng": p.rng.bit_generator.state,
                "weight": p.target.weight, "sim_seconds": p.sim_seconds,
                "op_seconds": p.op_seconds} for p in self.ps},
        }

    def restore(self, st: Mapping[str, Any]) -> None:
        """The search as :meth:`state` left it (the ledgers ``ps`` freshly built)."""
        from simcalib.metamodel.ensemble import Ensemble

        self.round, self.started = int(st["round"]), bool(st["started"])
        self.made = dict(st["made"])
        for t, s in st["rngs"].items():
            self.rngs[t].bit_generator.state = s
        self.traj, self.fm_info = list(st["traj"]), st["fm_info"]
        # a state written before the start repeated more than one point: "repeat"
        old = [st["repeat"]] if st.get("repeat") is not None else []
        self.repeats = [tuple(r) for r in st.get("repeats", old)]  # type: ignore[misc]
        self.noise = st["noise"]
        self.ens = Ensemble.from_state(st["ens"]) if st["ens"] is not None else None
        y_std, source = st["scale"]
        mm = self.p0.mm
        if source is not None and hasattr(mm, "source"):
            mm.y_std, mm.source = np.asarray(y_std), source
        for p in self.ps:
            t = st["targets"][p.target.target_id]
            p.runs, p.op_calls = list(t["runs"]), list(t["op_calls"])
            p.rng.bit_generator.state = t["rng"]
            p.target.weight = t["weight"]
            p._set_scale()
            p.sim_seconds, p.op_seconds = float(t["sim_seconds"]), float(t["op_seconds"])


def run_here(search: Search, props: Proposals) -> None:
    """Simulate a step's rows in this process (the one-job path), each target's
    through its ledger (journaled, counted)."""
    for p in search.ps:
        if p.target.target_id in props:
            X, phase = props[p.target.target_id]
            p.simulate(X, phase)
