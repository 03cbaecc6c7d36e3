"""Replicates and derived outputs, once for every simulator type.

``simulator.replicates: k`` runs each design point with ``k`` seeds and keeps the
mean of every output plus its spread as ``<output>_sd``; a stochastic simulator
(a 2,000-person agent-based model) then gives the metamodel a smoother target
without a wrapper script.  ``simulator.derived_outputs: {name: expression}`` adds
outputs computed from the parsed ones with the safe expression language of
:mod:`simcalib.expressions` (numbers, names, ``+ - * / **``), e.g. paper 1's
adults attack rate as a size-weighted mean of two age groups.

Why the order is "derive per run, then average": a derived output is then
exactly what a wrapper script would have printed, and its ``_sd`` is the spread of
that quantity (the mean of a ratio is not the ratio of the means).

Why a row is ``ok`` only when all ``k`` replicates are: averaging the survivors
would silently give some design points a noisier (and, when failures depend on
the draw, biased) mean.  A row with a failed replicate takes the first failure's
status and message, prefixed ``replicate j/k:``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.expressions import ExpressionError, evaluate, names_in
from simcalib.seeds import int_seed
from simcalib.simulators.base import STATUS_OK, WARNING_PREFIX, Simulator, finalize
from simcalib.simulators.probe import probe

RESERVED = ("status", "message", "run_id", "target_id")
SD_SUFFIX = "_sd"


def replicate_seeds(seeds: np.ndarray, k: int) -> np.ndarray:
    """``k`` seeds per row, shape ``(n, k)``, derived from each row's own seed (so
    they do not depend on the chunking); ``k == 1`` keeps the row's seed."""
    seeds = np.asarray(seeds, dtype=np.int64)
    if k == 1:
        return seeds.reshape(-1, 1)
    return np.array([[int_seed(int(s), "replicate", j) for j in range(k)] for s in seeds],
                    dtype=np.int64).reshape(len(seeds), k)


class SharedLayer:
    """Wraps a simulator: runs ``replicates`` seeds per row, evaluates
    ``derived`` outputs on every run, then averages.  ``outputs`` are the inner
    simulator's followed by the derived ones; ``extra_columns`` the ``_sd``
    columns the result also holds (when ``replicates > 1``)."""

    def __init__(self, inner: Simulator, replicates: int = 1,
                 derived: Mapping[str, str] | None = None, key: str = "simulator") -> None:
        self.inner = inner
        self.replicates = int(replicates)
        self.derived = dict(derived or {})
        self.key = key
        self.outputs = [*inner.outputs, *self.derived]
        self.extra_columns = ([f"{o}{SD_SUFFIX}" for o in self.outputs]
                              if self.replicates > 1 else [])

    # ---- batch -------------------------------------------------------------
    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        seeds = np.asarray(seeds)
        if len(seeds) != len(inputs):
            raise ValueError(f"{len(seeds)} seeds for {len(inputs)} rows")
        n, k = len(inputs), self.replicates
        if k == 1:
            return self.derive(self.inner.run(inputs, seeds, threads))
        # every replicate keeps its row's index label (a command's run_id)
        big = inputs.iloc[np.repeat(np.arange(n), k)]
        raw = self.derive(self.inner.run(big, replicate_seeds(seeds, k).ravel(), threads))
        return self.aggregate(raw, inputs.index)

    def cancel(self) -> None:
        """Kill the inner simulator's runs in flight (a chunk being interrupted)."""
        fn = getattr(self.inner, "cancel", None)
        if callable(fn):
            fn()

    def probe_row(self, inputs: pd.DataFrame, seed: int) -> pd.DataFrame:
        """One run of the first row (replicate 1's seed), derived outputs included;
        see :func:`simcalib.simulators.probe`."""
        s = int(replicate_seeds(np.array([seed]), self.replicates)[0, 0])
        return self.derive(probe(self.inner, inputs.iloc[:1], s))

    # ---- pieces ------------------------------------------------------------
    def derive(self, raw: pd.DataFrame) -> pd.DataFrame:
        """Add the derived outputs to a finalized result (one row per run)."""
        if not self.derived:
            return raw
        out = raw.copy()
        env: dict[str, Any] = {o: out[o].to_numpy(dtype=float) for o in self.inner.outputs}
        for name, expr in self.derived.items():
            with np.errstate(all="ignore"):
                val = evaluate(expr, env)
            env[name] = np.broadcast_to(np.asarray(val, dtype=float), (len(out),)).copy()
            out[name] = env[name]
        ok = out["status"] == STATUS_OK
        # a derived value of a failed run is NaN, whatever the expression gives
        out.loc[~ok, list(self.derived)] = np.nan
        return finalize(out, self.outputs, out.index, f"{self.key}.derived_outputs")

    def aggregate(self, raw: pd.DataFrame, index: pd.Index) -> pd.DataFrame:
        """Mean and sample standard deviation over each row's ``k`` consecutive runs."""
        n, k, outs = len(index), self.replicates, self.outputs
        vals = raw[outs].to_numpy(dtype=float).reshape(n, k, len(outs))
        status = raw["status"].to_numpy(dtype=object).reshape(n, k)
        message = raw["message"].to_numpy(dtype=object).reshape(n, k)
        all_ok = (status == STATUS_OK).all(axis=1)
        mean = np.full((n, len(outs)), np.nan)
        sd = np.full((n, len(outs)), np.nan)
        if all_ok.any():
            mean[all_ok] = vals[all_ok].mean(axis=1)
            sd[all_ok] = vals[all_ok].std(axis=1, ddof=1)
        res = pd.DataFrame(mean, columns=outs, index=index)
        for j, o in enumerate(outs):
            res[f"{o}{SD_SUFFIX}"] = sd[:, j]
        res["status"] = [row_status(st, k) for st in status]
        res["message"] = [row_message(st, msg, k) for st, msg in zip(status, message,
                                                                        strict=True)]
        return res


def row_status(status: Sequence[str], k: int) -> str:
    bad = [s for s in status if s != STATUS_OK]
    return bad[0] if bad else STATUS_OK


def row_message(status: Sequence[str], message: Sequence[str], k: int) -> str:
    bad = [j for j, s in enumerate(status) if s != STATUS_OK]
    if bad:
        j = bad[0]
        more = f" ({len(bad)} of {k} replicates failed)" if len(bad) > 1 else ""
        return f"replicate {j + 1}/{k}: {message[j]}{more}"
    warned = [j for j, m in enumerate(message) if str(m).startswith(WARNING_PREFIX)]
    if not warned:
        return ""
    j = warned[0]
    more = f" ({len(warned)} of {k} replicates warned)" if len(warned) > 1 else ""
    return f"{WARNING_PREFIX}replicate {j + 1}/{k}: {message[j][len(WARNING_PREFIX):]}{more}"


# ---------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------
def read_layer_spec(spec: Mapping[str, Any], key: str) -> tuple[int, dict[str, str]]:
    """``replicates`` and ``derived_outputs`` of ``studies.<s>.simulator``, checked."""
    k = spec.get("replicates", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{key}.replicates", f"must be a positive integer, got {k!r}")
    derived = spec.get("derived_outputs") or {}
    if not isinstance(derived, Mapping):
        raise ConfigError(f"{key}.derived_outputs", "must map output names to expressions, "
                          "e.g. {adults: '0.4 * ar_19_29 + 0.6 * ar_30_64'}")
    out: dict[str, str] = {}
    for name, expr in derived.items():
        dkey = f"{key}.derived_outputs.{name}"
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED:
            raise ConfigError(dkey, "an output name must be an identifier (letters, digits, "
                              f"'_') other than {list(RESERVED)}")
        if isinstance(expr, bool) or not isinstance(expr, str | int | float):
            raise ConfigError(dkey, f"must be an expression string, got {expr!r}")
        try:
            names_in(str(expr))
        except ExpressionError as exc:
            raise ConfigError(dkey, str(exc)) from None
        out[name] = str(expr)
    return k, out


def inner_outputs(declared: Sequence[str] | None, derived: Mapping[str, str]) -> list[str] | None:
    """The outputs the wrapped simulator must produce for a study that declares
    ``declared``: those not derived, plus every name a derived expression reads
    that is not itself derived (so ``outputs: [adults]`` alone is enough)."""
    if not declared or not derived:
        return list(declared) if declared else None
    need = [o for o in declared if o not in derived]
    for expr in derived.values():
        for name in sorted(names_in(expr)):
            if name not in derived and name not in need:
                need.append(name)
    return need or None


def check_layer(inner: Simulator, k: int, derived: Mapping[str, str], key: str) -> None:
    """Names a derived expression reads must be outputs of the simulator or earlier
    derived outputs; a trial evaluation catches ``1/0`` and overflow at validation;
    ``_sd`` columns must not collide with output names."""
    import difflib

    known = list(inner.outputs)
    for name, expr in derived.items():
        dkey = f"{key}.derived_outputs.{name}"
        if name in inner.outputs:
            raise ConfigError(dkey, f"{name!r} is already an output of the simulator")
        for ref in sorted(names_in(expr)):
            if ref not in known:
                close = difflib.get_close_matches(ref, known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(dkey, f"{expr!r} reads {ref!r}, which is not a simulator "
                                  f"output or an earlier derived output{hint}; known: {known}")
        try:  # arrays, as at run time: only constant parts can raise here
            with np.errstate(all="ignore"):
                evaluate(expr, {n: np.ones(1) for n in known})
        except (ArithmeticError, ExpressionError) as exc:
            raise ConfigError(dkey, f"{expr!r} cannot be evaluated: "
                              f"{type(exc).__name__}: {exc}") from None
        known.append(name)
    if k > 1:
        clash = [f"{o}{SD_SUFFIX}" for o in known if f"{o}{SD_SUFFIX}" in known]
        if clash:
            raise ConfigError(f"{key}.replicates", f"replicates add '<output>{SD_SUFFIX}' "
                              f"columns, which clash with the output(s) {clash}; rename them")
