"""Quarter-specimen meshes: a rectangle ``[0, w] x [0, h]`` (half-width, half-length)
with a quarter elliptical hole of semi-axes ``a`` (along x, across the load) and
``b`` (along y, the load) at the origin, generated for each hole geometry.

Why a mapped (structured) mesh rather than a Delaunay mesher: every specimen of a
study gets the same topology, the node count is known in advance (so the cost of a
run is too), no mesher dependency is needed, and refinement is one integer.  The
near-hole block ``[0, w] x [0, H]`` (``H = max(w, 2 b)``) is an O-grid: rays from
points of the ellipse to points of its outer boundary (the right edge, then the top
edge, meeting at the corner), graded geometrically toward the hole where the stress
concentrates; the block above it up to ``h`` shares its top-edge nodes and is graded
toward the hole block.  Quadrilaterals are split into two triangles each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcalib.errors import ConfigError


@dataclass(frozen=True)
class MeshSize:
    """Mesh density: ``n_arc`` segments along the quarter hole, ``n_rad`` radial
    layers in the hole block (``ratio``: outer over inner layer thickness) and
    ``n_top`` layers above it (``top_ratio`` likewise).  ``refined(k)`` multiplies
    every count by 2**k."""

    n_arc: int = 12
    n_rad: int = 6
    n_top: int = 4
    ratio: float = 6.0
    top_ratio: float = 3.0

    def refined(self, k: int) -> MeshSize:
        f = 2 ** k
        return MeshSize(self.n_arc * f, self.n_rad * f, self.n_top * f, self.ratio,
                        self.top_ratio)


def graded(n: int, ratio: float) -> np.ndarray:
    """n + 1 points on [0, 1] whose last interval is ``ratio`` times the first."""
    if n < 1:
        raise ConfigError("mesh", "need at least one interval")
    if abs(ratio - 1.0) < 1e-12:
        return np.linspace(0.0, 1.0, n + 1)
    q = ratio ** (1.0 / max(n - 1, 1))
    t = np.concatenate([[0.0], np.cumsum(q ** np.arange(n))])
    return t / t[-1]


def quarter_plate(w: float, h: float, a: float, b: float, size: MeshSize = MeshSize()
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Points [2, N] and triangles [3, M] (counter-clockwise) of the quarter plate."""
    if not (0 < a < w):
        raise ConfigError("a", f"hole semi-axis a = {a} must lie in (0, half-width {w})")
    H = max(w, 2.0 * b)
    if not (0 < b < H < h):
        raise ConfigError("b", f"hole semi-axis b = {b} must lie in (0, {h / 2}) "
                               f"(half-length {h})")
    # outer path: (w, 0) -> (w, H) -> (0, H); corner node index n1
    n1 = max(2, round(size.n_arc * H / (H + w)))
    n2 = max(2, size.n_arc - n1)
    s1, s2 = np.linspace(0, 1, n1 + 1), np.linspace(0, 1, n2 + 1)[1:]
    outer = np.concatenate([np.stack([np.full_like(s1, w), s1 * H]),
                            np.stack([w - s2 * w, np.full_like(s2, H)])], axis=1)
    # ellipse points: the parametric angle of the corner is that of (w/a, H/b)
    phic = np.arctan2(H / b, w / a)
    phi = np.concatenate([s1 * phic, phic + s2 * (np.pi / 2 - phic)])
    inner = np.stack([a * np.cos(phi), b * np.sin(phi)])
    inner[0, -1], inner[1, 0] = 0.0, 0.0                 # exact symmetry-line nodes
    t = graded(size.n_rad, size.ratio)
    hole_pts = inner[:, :, None] + (outer - inner)[:, :, None] * t[None, None, :]
    na = n1 + n2 + 1                                       # nodes along the path
    nr = size.n_rad + 1
    hole_idx = np.arange(na * nr).reshape(na, nr)          # [path node, radial node]
    pts = [hole_pts.reshape(2, -1)]
    # top block: columns = outer top-edge nodes (x from w down to 0), rows graded
    top_cols = hole_idx[n1:, -1]                          # n2 + 1 nodes
    ty = H + (h - H) * graded(size.n_top, size.top_ratio)
    xs = outer[0, n1:]
    grid = np.empty((len(xs), size.n_top + 1), dtype=int)
    grid[:, 0] = top_cols
    new = np.stack([np.repeat(xs, size.n_top), np.tile(ty[1:], len(xs))])
    grid[:, 1:] = na * nr + np.arange(new.shape[1]).reshape(len(xs), size.n_top)
    pts.append(new)
    p = np.concatenate(pts, axis=1)
    tris = [_split(hole_idx), _split(grid)]
    t_all = np.concatenate(tris, axis=1)
    # orient counter-clockwise
    x, y = p[0, t_all], p[1, t_all]
    area = (x[1] - x[0]) * (y[2] - y[0]) - (x[2] - x[0]) * (y[1] - y[0])
    t_all[[1, 2]] = np.where(area < 0, t_all[[2, 1]], t_all[[1, 2]])
    return p, t_all


def _split(idx: np.ndarray) -> np.ndarray:
    """Triangles of the structured quad grid ``idx`` [i, j], each quad cut along the
    diagonal that alternates with the parity of i + j (no preferred direction)."""
    a, b = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
    c, d = idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    ii, jj = np.meshgrid(np.arange(idx.shape[0] - 1), np.arange(idx.shape[1] - 1),
                         indexing="ij")
    even = ((ii + jj) % 2 == 0).ravel()
    t1 = np.where(even, [a, b, c], [a, b, d])
    t2 = np.where(even, [a, c, d], [b, c, d])
    return np.concatenate([t1, t2], axis=1)


def rectangle(w: float, h: float, nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """A hole-free quarter plate (the homogeneous bar of the verification tests)."""
    xs, ys = np.linspace(0, w, nx + 1), np.linspace(0, h, ny + 1)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    idx = np.arange(X.size).reshape(X.shape)
    p = np.stack([X.ravel(), Y.ravel()])
    t = _split(idx)
    x, y = p[0, t], p[1, t]
    area = (x[1] - x[0]) * (y[2] - y[0]) - (x[2] - x[0]) * (y[1] - y[0])
    t[[1, 2]] = np.where(area < 0, t[[2, 1]], t[[1, 2]])
    return p, t
