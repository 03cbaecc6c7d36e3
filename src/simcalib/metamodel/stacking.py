"""Network algebra on ReLU nets: several nets as one, so the MILP needs no new code.

The exact MILP (:mod:`simcalib.metamodel.milp`) embeds one ``Linear, ReLU, ...,
Linear`` network.  **Side by side** (:func:`side_by_side`): nets reading the same
inputs become one net whose first layer stacks theirs, whose hidden layers are
block-diagonal and whose outputs are theirs, concatenated.  A metamodel plus a
run-success classifier is then one network with one extra output (the classifier's
logit), which the MILP bounds from below (:func:`simcalib.metamodel.failure.guarded`).

Nets of different depths are padded to the deepest: a linear output z passes an
extra ReLU layer as ``ReLU(z) - ReLU(-z)`` (two neurons per output, both always
stable in sign, so the MILP pays at most a binary per padding neuron that straddles
zero).  Layers are ``(W, b)`` pairs in standardised units (``Metamodel.linear_layers``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from simcalib.metamodel.model import DTYPE, build_net

Layers = list[tuple[np.ndarray, np.ndarray]]


def pad_depth(layers: Layers, depth: int) -> Layers:
    """``layers`` (``len(layers) - 1`` hidden layers) with identity layers appended
    until there are ``depth`` hidden layers; the net's function is unchanged."""
    out = [(W.copy(), b.copy()) for W, b in layers]
    while len(out) - 1 < depth:
        W, b = out[-1]
        p = W.shape[0]
        # the old output layer becomes a hidden layer producing (z, -z) ...
        out[-1] = (np.vstack([W, -W]), np.concatenate([b, -b]))
        # ... and the new output layer reads ReLU(z) - ReLU(-z) = z
        eye = np.eye(p)
        out.append((np.hstack([eye, -eye]), np.zeros(p)))
    return out


def _block(mats: Sequence[np.ndarray]) -> np.ndarray:
    rows = sum(m.shape[0] for m in mats)
    cols = sum(m.shape[1] for m in mats)
    out = np.zeros((rows, cols))
    r = c = 0
    for m in mats:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r += m.shape[0]
        c += m.shape[1]
    return out


def side_by_side(nets: Sequence[Layers]) -> Layers:
    """One net computing every net of ``nets`` on the same inputs; its outputs are
    theirs, concatenated in order."""
    depth = max(len(n) - 1 for n in nets)
    nets = [pad_depth(n, depth) for n in nets]
    out: Layers = []
    for k in range(depth + 1):
        Ws = [n[k][0] for n in nets]
        bs = np.concatenate([n[k][1] for n in nets])
        W = np.vstack(Ws) if k == 0 else _block(Ws)
        out.append((W, bs))
    return out


def mean_of(nets: Sequence[Layers]) -> Layers:
    """One net computing the mean of the outputs of ``nets`` (all reading the same
    standardised inputs and writing the same standardised outputs): the nets side by
    side, their output layers averaged.  The mean of an ensemble of ReLU nets is then
    one (wider) ReLU net, which the MILP embeds exactly."""
    stacked = side_by_side(nets)
    W, b = stacked[-1]
    m = len(nets)
    p = W.shape[0] // m
    avg = np.hstack([np.eye(p)] * m) / m
    stacked[-1] = (avg @ W, avg @ b)
    return stacked


def rescale_inputs(layers: Layers, mean_from: np.ndarray, std_from: np.ndarray,
                   mean_to: np.ndarray, std_to: np.ndarray) -> Layers:
    """The same function of the raw inputs when the inputs are standardised with
    (``mean_to``, ``std_to``) instead of (``mean_from``, ``std_from``):
    (x - m0) / s0 = ((x - m1) / s1 * s1 + m1 - m0) / s0."""
    W, b = layers[0]
    W2 = W * (std_to / std_from)[None, :]
    b2 = b + W @ ((mean_to - mean_from) / std_from)
    return [(W2, b2), *[(w.copy(), c.copy()) for w, c in layers[1:]]]


def to_torch(layers: Layers) -> nn.Sequential:
    """``layers`` as a float64 ``nn.Sequential`` of :func:`build_net`'s shape."""
    hidden = [W.shape[0] for W, _ in layers[:-1]]
    net = build_net(layers[0][0].shape[1], hidden, layers[-1][0].shape[0])
    lins = [m for m in net if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for lin, (W, b) in zip(lins, layers, strict=True):
            lin.weight.copy_(torch.as_tensor(W, dtype=DTYPE))
            lin.bias.copy_(torch.as_tensor(b, dtype=DTYPE))
    return net.eval()
