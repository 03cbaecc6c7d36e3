"""Error types that name what went wrong and where.

Every user-facing failure (bad config key, bad data file, unusable simulator output)
raises one of these so that the CLI can print one clear line instead of a traceback.
"""

from __future__ import annotations


class SimcalibError(Exception):
    """Base class for errors the CLI reports as a single line (exit status 2)."""


class ConfigError(SimcalibError):
    """A configuration value is invalid.  ``path`` is the dotted key path, e.g.
    ``studies.epidemic.parameters.R0.lower``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"config key '{path}': {message}" if path else f"config: {message}")


class DataError(SimcalibError):
    """An input file (dataset, targets, metamodel, simulator output) is unusable.
    ``source`` names the file."""

    def __init__(self, source: str, message: str) -> None:
        self.source = str(source)
        self.message = message
        super().__init__(f"{source}: {message}")
