"""Simulators behind one protocol, found by name (see :mod:`.base`).

Built-in types: ``rosenbrock``, ``epidemic`` (FluTE-style), ``python``
(``module:function``) and ``command`` (an external executable).
"""

from simcalib.simulators import epidemic_adapter, pyfunc, rosenbrock  # noqa: F401  (register)
from simcalib.simulators.base import REGISTRY, Simulator, finalize, make_simulator, study_outputs

__all__ = ["REGISTRY", "Simulator", "finalize", "make_simulator", "study_outputs"]
