"""One probe run before a chunk's hundreds: a study whose outputs cannot be read
fails in seconds, not after every run went through the simulator.

The chunk code calls :func:`probe` with the chunk's first row and its seed before
it starts the batch.  A simulator that can tell a broken *config* from a failed
*run* implements ``probe_row(inputs, seed)`` and raises
:class:`~simcalib.errors.ConfigError` for the former: the command simulator when
an ``output_map`` key is not in the output file (naming the ``output_map`` entry,
listing the file's keys and the nearest one), the ``python`` simulator when the
function returns no column for an output.  Any other failure of the probe row (a
crash, a timeout, a NaN) is returned as a status row, because it may be specific
to that row's inputs; the caller logs it and carries on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.simulators.base import Simulator


def _as_batch(row: pd.DataFrame | pd.Series | Mapping[str, Any]) -> pd.DataFrame:
    if isinstance(row, pd.DataFrame):
        if row.empty:
            raise ValueError("probe needs one input row, got an empty frame")
        return row.iloc[:1]
    if isinstance(row, pd.Series):
        return row.to_frame().T.infer_objects()
    return pd.DataFrame([dict(row)])


def probe(simulator: Simulator, row: pd.DataFrame | pd.Series | Mapping[str, Any],
          seed: int) -> pd.DataFrame:
    """Run ``row`` (a one-row frame whose index label is the run id, a Series or a
    mapping of input values) once with ``seed``; return the one-row result
    (outputs, ``status``, ``message``), or raise ``ConfigError`` when an output can
    never be read (see the module docstring).

    With ``replicates: 1`` the result is exactly what :meth:`run` gives for that
    row and seed, so the caller may keep it as the row's result instead of running
    the row again; with replicates it is one replicate only and must not be kept.
    """
    batch = _as_batch(row)
    hook = getattr(simulator, "probe_row", None)
    if hook is not None:
        return hook(batch, int(seed))
    return simulator.run(batch, np.array([int(seed)], dtype=np.int64))


def probe_is_reusable(simulator: Simulator) -> bool:
    """Whether :func:`probe`'s row equals the batch result for that row and seed
    (true unless the simulator runs several replicates per row)."""
    return int(getattr(simulator, "replicates", 1)) == 1
