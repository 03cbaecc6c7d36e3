"""The report: its sections (:mod:`~simcalib.report.sections`: what each table and
block shows), the Markdown/HTML assembly (:mod:`~simcalib.report.build`,
:mod:`~simcalib.report.html`).  Each method keeps its own ``plots.py``; this package
only reads the files the workflow wrote, so it never imports torch or a solver.
"""
