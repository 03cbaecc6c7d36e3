"""Seed derivation: one top-level seed, every random stream derived from it.

A stream is identified by the top-level seed plus a tuple of keys (study name,
stage name, wildcard values, row index ...).  String keys are hashed with a stable
hash (not Python's salted ``hash``), so any single Snakemake target can be
recomputed alone and give the same numbers as in a full run.
"""

from __future__ import annotations

import hashlib

import numpy as np

Key = str | int


def _key_to_int(key: Key) -> int:
    if isinstance(key, bool):  # bool is an int subclass; keep it distinct from 0/1
        key = str(key)
    if isinstance(key, int | np.integer):
        if int(key) < 0:
            raise ValueError(f"seed keys must be non-negative integers or strings, got {key}")
        return int(key)
    digest = hashlib.sha256(str(key).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def seed_sequence(seed: int, *keys: Key) -> np.random.SeedSequence:
    """SeedSequence for the stream named by ``keys`` under the top-level ``seed``."""
    return np.random.SeedSequence([int(seed), *(_key_to_int(k) for k in keys)])


def rng(seed: int, *keys: Key) -> np.random.Generator:
    """A numpy Generator for the stream named by ``keys``."""
    return np.random.default_rng(seed_sequence(seed, *keys))


def int_seed(seed: int, *keys: Key) -> int:
    """A 63-bit integer seed for libraries that want an int (torch, optuna, scipy)."""
    return int(seed_sequence(seed, *keys).generate_state(2, dtype=np.uint32).view(np.uint64)[0]
               & np.uint64(2**63 - 1))


def row_seeds(seed: int, stream: Key, row_ids: np.ndarray) -> np.ndarray:
    """One independent seed per simulation row, keyed by the row's id (not its position
    in a chunk), so that results do not depend on how a design is chunked."""
    return np.array([int_seed(seed, stream, int(r)) for r in row_ids], dtype=np.int64)
