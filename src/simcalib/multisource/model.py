"""The iPro-NC network (paper §3.1, Fig. 1).

Block 0: one-hot source indicator -> z^s.  Block 1: (z^s, masked theta) -> z^theta.
Block 2: one-hot categorical combination -> z^c (absent without categoricals).
Block 3: (x, z^theta, z^c) -> mean and standard deviation of every output column.

Per low-fidelity source the calibration parameters theta-hat ~ Normal(mu, sd)
(diagonal) live in the scaled parameter space; a sample is drawn with the
reparameterisation trick and then clamped into that source's training range by a
scaled tanh, ``c + h * tanh((raw - c) / h)`` with c and h the centre and half-width
of the range, so the network never has to extrapolate in theta.  Masking multiplies
the parameter input by the source's slot mask: the high-fidelity source has no slot,
so its predictions are exactly independent of any dummy parameter value (a
structural guarantee instead of the paper's extra loss term).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from simcalib.errors import ConfigError
from simcalib.multisource.tensors import Batch

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU}


def mlp(n_in: int, hidden: list[int], n_out: int, activation: str) -> nn.Sequential:
    if activation not in ACTIVATIONS:
        raise ConfigError("activation", f"unknown activation {activation!r}; "
                                        f"allowed {sorted(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(n_in, h), ACTIVATIONS[activation]()]
        n_in = h
    layers.append(nn.Linear(n_in, n_out))
    for m in layers:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return nn.Sequential(*layers)


def _inv_softplus(v: float) -> float:
    return v + math.log(-math.expm1(-v))


class IProNC(nn.Module):
    def __init__(self, *, n_sources: int, n_x: int, n_cat: int, n_y: int,
                 slot_mask: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 theta_init: np.ndarray, sd_init: float,
                 fixed_mask: np.ndarray | None = None, fixed_value: np.ndarray | None = None,
                 block0: list[int] = (5,), block1: list[int] = (5,), block2: list[int] = (5,),
                 block3: list[int] = (16, 32, 16, 8), latent: int = 2,
                 activation: str = "tanh", sd_floor: float = 1e-3) -> None:
        super().__init__()
        S, K = slot_mask.shape
        self.n_sources, self.n_theta, self.n_y, self.sd_floor = n_sources, K, n_y, sd_floor
        self.use_cat = n_cat > 1
        self.block0 = mlp(n_sources, list(block0), latent, activation)
        self.block1 = mlp(latent + K, list(block1), latent, activation)
        self.block2 = mlp(n_cat, list(block2), latent, activation) if self.use_cat else None
        n3 = n_x + latent + (latent if self.use_cat else 0)
        self.block3 = mlp(n3, list(block3), 2 * n_y, activation)
        f = lambda a: torch.as_tensor(np.asarray(a, dtype=float), dtype=torch.float32)  # noqa: E731
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        width = np.where(slot_mask > 0, hi - lo, 2.0)
        centre = np.where(slot_mask > 0, (hi + lo) / 2, 0.0)
        half = np.maximum(width / 2, 1e-6)
        fixed_mask = (np.zeros_like(slot_mask) if fixed_mask is None else fixed_mask) > 0
        fixed_mask |= (slot_mask > 0) & (width <= 2e-6)     # constant in the data: fixed
        if fixed_value is None:
            fixed_value = np.zeros_like(slot_mask)
        fixed_value = np.where(fixed_mask & np.isnan(fixed_value), theta_init, fixed_value)
        self.register_buffer("slot_mask", f(slot_mask))
        self.register_buffer("clamp_centre", f(centre))
        self.register_buffer("clamp_half", f(half))
        self.register_buffer("fixed_mask", torch.as_tensor(fixed_mask))
        self.register_buffer("fixed_value", f(np.nan_to_num(fixed_value)))
        # Start at the data mean: raw value whose clamp equals theta_init.
        ratio = np.clip((np.asarray(theta_init, float) - centre) / half, -0.999, 0.999)
        raw0 = np.where(slot_mask > 0, centre + half * np.arctanh(ratio), 0.0)
        self.theta_mu = nn.Parameter(f(raw0))
        self.theta_rho = nn.Parameter(torch.full((S, K), _inv_softplus(sd_init)))

    # -- calibration parameters ---------------------------------------------------
    def network_parameters(self) -> list[nn.Parameter]:
        return [p for n, p in self.named_parameters() if not n.startswith("theta_")]

    def calibration_parameters(self) -> list[nn.Parameter]:
        return [self.theta_mu, self.theta_rho]

    def theta_sd(self) -> torch.Tensor:
        return nn.functional.softplus(self.theta_rho) + 1e-6

    def learned_mask(self) -> torch.Tensor:
        """[S, K] bool: slots whose distribution is learned (declared, not fixed)."""
        return (self.slot_mask > 0) & ~self.fixed_mask

    def clamp(self, raw: torch.Tensor, src: torch.Tensor | None = None) -> torch.Tensor:
        c, h = ((self.clamp_centre, self.clamp_half) if src is None
                else (self.clamp_centre[src], self.clamp_half[src]))
        return c + h * torch.tanh((raw - c) / h)

    def sample_theta(self, src: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """theta-hat for rows of source ``src`` (scaled space, masked), reparameterised."""
        raw = self.theta_mu[src] + self.theta_sd()[src] * eps
        th = self.clamp(raw, src)
        th = torch.where(self.fixed_mask[src], self.fixed_value[src], th)
        return th * self.slot_mask[src]

    # -- network ------------------------------------------------------------------
    def latents(self, src: torch.Tensor, theta_in: torch.Tensor, cat: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        onehot = nn.functional.one_hot(src, self.n_sources).to(theta_in.dtype)
        zs = self.block0(onehot)
        zt = self.block1(torch.cat([zs, theta_in * self.slot_mask[src]], dim=1))
        zc = self.block2(cat) if self.block2 is not None else None
        return zs, zt, zc

    def head(self, x: torch.Tensor, zt: torch.Tensor, zc: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [x, zt] + ([zc] if zc is not None else [])
        out = self.block3(torch.cat(parts, dim=1))
        mu, s = out[:, : self.n_y], out[:, self.n_y:]
        return mu, nn.functional.softplus(s) + self.sd_floor

    def predict(self, src: torch.Tensor, x: torch.Tensor, theta_in: torch.Tensor,
                cat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, zt, zc = self.latents(src, theta_in, cat)
        return self.head(x, zt, zc)

    def forward(self, batch: Batch, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Means and sds of every batch row.  Calibration rows use theta-hat; emulation
        rows use their own data, with declared-but-missing values filled by a detached
        theta-hat sample (no gradient from emulation into theta-hat)."""
        th_hat = self.sample_theta(batch.src, eps)
        th_em = torch.where(batch.theta_nan, th_hat.detach(), batch.theta)
        theta_in = torch.where(batch.is_cal, th_hat, th_em)
        return self.predict(batch.src, batch.x, theta_in, batch.cat)
