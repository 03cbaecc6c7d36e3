"""HiGHS's thread count is process-global: the first ``run()`` initialises one
scheduler with its ``threads`` option, and a later instance asking for another
count fails without solving (status "not set").  Training records stability with
single-threaded LPs, then OP solves with the option set's threads in the same
process (the benchmark, the calibration strategies), so every HiGHS instance sets
its threads through :func:`set_threads`, which resets the scheduler when the count
changes."""

from __future__ import annotations

from typing import Any

_current: int | None = None


def set_threads(h: Any, threads: int) -> None:
    """Set ``threads`` (> 0) on HiGHS instance ``h``, resetting the global scheduler
    first when an earlier instance of this process used another count."""
    global _current
    import highspy

    n = int(threads)
    if n <= 0:
        return
    if _current is not None and _current != n:
        highspy.Highs.resetGlobalScheduler(True)
    _current = n
    h.setOptionValue("threads", n)
