"""simcalib: calibrate expensive simulators.

The library is a set of pure functions and small classes; the Snakemake workflow
(``Snakefile``, ``workflow/``) calls it through the ``simcalib`` command line, one
verb per workflow step.  Nothing here imports Snakemake.
"""

__version__ = "0.1.0"
