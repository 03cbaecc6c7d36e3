"""A small finite-element model of the paper-2 tension specimen (scikit-fem):
quarter plate with an elliptical hole (:mod:`.mesh`), plane-stress von Mises
plasticity with Holloman or Voce hardening (:mod:`.material`), Newton with the
consistent tangent under displacement control (:mod:`.solver`), and the specimen's
responses at 12 surface points (:mod:`.specimen`).  Verified in
``tests/simulators/test_fe_tension.py``; docs/multisource.md describes the model."""

import logging

# scikit-fem logs two INFO lines per basis it builds, i.e. several per run: thousands
# of lines in a chunk's log that say nothing about the run.  Its warnings still show.
logging.getLogger("skfem").setLevel(logging.WARNING)
