"""Simulators behind one protocol, found by name (see :mod:`.base`).

Built-in types: ``rosenbrock``, ``epidemic`` (FluTE-style), ``python``
(``module:function``) and ``command`` (an external executable).
"""

from simcalib.simulators import (  # noqa: F401  (register)
    command,
    epidemic_adapter,
    pyfunc,
    rosenbrock,
)
from simcalib.simulators.base import (
    REGISTRY,
    STATUSES,
    WARNING_PREFIX,
    Simulator,
    count_warnings,
    finalize,
    make_simulator,
    study_outputs,
)

__all__ = ["REGISTRY", "STATUSES", "WARNING_PREFIX", "Simulator", "count_warnings", "finalize",
           "make_simulator", "study_outputs"]
