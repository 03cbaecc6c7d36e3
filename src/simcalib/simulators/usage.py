"""CPU time of a batch, the simulator's child processes included.

``time.process_time`` counts only the Python process itself, so a chunk of
command-simulator runs looked almost free (the runtime table understated them
about 3x).  ``getrusage(RUSAGE_CHILDREN)`` adds the CPU time of every child
process that has ended and been waited for: each command run (with the children
*it* waited for), each isolated Python worker, the watchdog.  It does not count
children still running, nor background processes a run left behind (they are
killed with its process group and reaped by init, not by us).

Use::

    with measure_cpu() as cpu:
        result = simulator.run(batch, seeds, threads)
    summary.update(cpu.as_dict())   # cpu_self_s, cpu_children_s, cpu_s, wall_s
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class CpuTimes:
    """User + system CPU seconds of this process (all threads) and of its ended,
    waited-for children, and the wall clock, at one instant or over a span."""

    self_s: float = 0.0
    children_s: float = 0.0
    wall_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.self_s + self.children_s

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.self_s - other.self_s, self.children_s - other.children_s,
                        self.wall_s - other.wall_s)

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        """``cpu_self_s``, ``cpu_children_s``, ``cpu_s`` (their sum) and ``wall_s``."""
        return {"cpu_self_s": round(self.self_s, digits),
                "cpu_children_s": round(self.children_s, digits),
                "cpu_s": round(self.total_s, digits), "wall_s": round(self.wall_s, digits)}


def cpu_times() -> CpuTimes:
    """A snapshot; subtract two to get a span (or use :func:`measure_cpu`)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuTimes(me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, time.perf_counter())


@contextmanager
def measure_cpu() -> Iterator[CpuTimes]:
    """Yields a :class:`CpuTimes` that holds the span's times when the block ends
    (also when it raises).  Children are per process, not per thread: two batches
    measured at once in one process would each see the other's children."""
    span = CpuTimes()
    start = cpu_times()
    try:
        yield span
    finally:
        d = cpu_times() - start
        span.self_s, span.children_s, span.wall_s = d.self_s, d.children_s, d.wall_s
