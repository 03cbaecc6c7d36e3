"""The shared study model and simulation stage, used by every metamodel study:

* :mod:`~simcalib.study.space` and :mod:`~simcalib.study.feasibility` -- parameter
  spaces (bounds, integers, logs, contexts, linear constraints) and their designs;
* :mod:`~simcalib.study.model` -- :class:`Study`, one entry of ``config['studies']``;
* :mod:`~simcalib.study.simulation` -- chunked simulation of a design or a target set;
* :mod:`~simcalib.study.journal` -- the per-run journal that makes chunks resumable;
* :mod:`~simcalib.study.merge` -- merging chunks into one dataset;
* :mod:`~simcalib.study.observations` -- observed targets read from a user's file;
* :mod:`~simcalib.study.checks` -- the config checks a schema cannot express.

``from simcalib.study import Study`` is the public entry point (docs/api.md).
"""

from simcalib.study.model import Study, build_study

__all__ = ["Study", "build_study"]

