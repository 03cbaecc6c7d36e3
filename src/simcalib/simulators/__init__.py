"""Simulators behind one protocol, found by name (see :mod:`.base`).

Built-in types: ``rosenbrock``, ``epidemic`` (FluTE-style), ``tension_fe`` (paper 2's
finite-element tension specimen, :mod:`.fe`), ``python`` (``module:function``) and
``command`` (an external executable).
"""

from simcalib.simulators.base import (
    REGISTRY,
    STATUSES,
    WARNING_PREFIX,
    Simulator,
    count_warnings,
    finalize,
    result_columns,
    study_outputs,
)
from simcalib.simulators.factory import build_simulator
from simcalib.simulators.layer import SharedLayer, replicate_seeds
from simcalib.simulators.probe import probe, probe_is_reusable
from simcalib.simulators.usage import CpuTimes, cpu_times, measure_cpu

__all__ = [
    "REGISTRY", "STATUSES", "WARNING_PREFIX", "CpuTimes", "SharedLayer", "Simulator",
    "count_warnings", "cpu_times", "finalize", "build_simulator", "measure_cpu", "probe",
    "probe_is_reusable", "replicate_seeds", "result_columns", "study_outputs",
]

