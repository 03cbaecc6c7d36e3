"""CLI verbs, one module per workflow stage (see :mod:`simcalib.cli`)."""
