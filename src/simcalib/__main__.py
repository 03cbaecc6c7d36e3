"""``python -m simcalib``: the same command as ``simcalib`` (the rules use this form,
so they run wherever the workflow's environment has Python and the dependencies)."""

import sys

from simcalib.cli import main

sys.exit(main())
