"""Flow-matching head: an action chunk generated from noise, as pi0 and SmolVLA do.

    noise x_1 ~ N(0,I) [B,K,A] ─ flatten ──────────┐
    flow time t [B] ─ sin/cos embedding [B,Dt] ────┼─ concat ─ MLP denoiser ─> velocity [B,K,A]
    readout features [B,R,D] ─ flatten [B,R*D] ────┘

Conventions follow lerobot's pi0 / SmolVLA (`sample_noise`, `sample_time`, `sample_actions`):
t = 1 is pure noise and t = 0 the data; x_t = t * noise + (1 - t) * actions; the denoiser
regresses the velocity u = noise - actions; training draws one t per sample from
0.001 + 0.999 * Beta(1.5, 1), which favours noisy times; inference starts from noise at t = 1
and takes `flow_steps` Euler steps of dt = -1 / flow_steps down to t = 0. The time embedding
is pi0's sin/cos with periods from 4e-3 to 4.

Why a generative head: the same observation can have several good action chunks (pass a
distractor on the left or on the right). Regression averages them, bins flatten each
dimension separately; a flow maps noise to one of them, so its samples keep every mode.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.heads.base import ActionHead, flatten_readouts, mean_over_real_steps


def time_embedding(
    t: Tensor, dim: int, min_period: float = 4e-3, max_period: float = 4.0
) -> Tensor:
    """Flow times [B] in [0,1] -> sin/cos features [B,dim] (pi0's periods, geometric)."""
    if dim % 2 != 0:
        raise ValueError(f"time embedding needs an even dim, got time_dim={dim}")
    fraction = torch.linspace(0.0, 1.0, dim // 2, device=t.device)  # [dim/2]
    period = min_period * (max_period / min_period) ** fraction
    angles = (2 * math.pi / period)[None, :] * t[:, None].float()  # [B,dim/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # [B,dim]


class FlowHead(ActionHead):
    """Conditional flow matching over the whole chunk, with an MLP denoiser.

    Args:
        d_model, action_dim, num_readouts, chunk_size: see `ActionHead`.
        flow_steps: Euler steps at inference.
        hidden_dim: denoiser width (None: 2 * d_model).
        time_dim: width of the flow-time embedding.
        seed: seeds the inference noise; `reset()` restarts it, so an evaluation that starts
            with `policy.reset()` draws the same noise every time it runs.
    """

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_readouts: int = 1,
        chunk_size: int = 1,
        flow_steps: int = 10,
        hidden_dim: int | None = None,
        time_dim: int = 32,
        seed: int = 0,
    ):
        super().__init__(d_model, action_dim, num_readouts, chunk_size)
        if flow_steps < 1:
            raise ConfigError(f"flow_steps={flow_steps} must be >= 1")
        if time_dim < 2 or time_dim % 2:
            raise ConfigError(f"time_dim={time_dim} must be even and >= 2")
        self.flow_steps = flow_steps
        self.hidden_dim = 2 * d_model if hidden_dim is None else hidden_dim
        self.time_dim = time_dim
        self.seed = seed
        self._generator: torch.Generator | None = None  # inference noise, made on first use
        chunk = chunk_size * action_dim
        H = self.hidden_dim
        self.denoiser = nn.Sequential(
            nn.Linear(chunk + time_dim + num_readouts * d_model, H),  # [B,K*A+Dt+R*D] -> [B,H]
            nn.GELU(),
            nn.Linear(H, H),
            nn.GELU(),
            nn.Linear(H, chunk),  # [B,H] -> [B,K*A]
        )

    def velocity(self, x_t: Tensor, t: Tensor, features: Tensor) -> Tensor:
        """The denoiser: noisy chunks x_t [B,K,A] at times t [B] -> velocities [B,K,A]."""
        B, K, A = x_t.shape
        inputs = torch.cat(
            [
                rearrange(x_t, "b k a -> b (k a)"),  # [B,K*A]
                time_embedding(t, self.time_dim).to(x_t.dtype),  # [B,Dt]
                flatten_readouts(features),  # [B,R*D]
            ],
            dim=-1,
        )  # -> [B,K*A+Dt+R*D]
        return rearrange(self.denoiser(inputs), "b (k a) -> b k a", k=K)  # -> [B,K,A]

    def sample(self, features: Tensor, noise: Tensor) -> Tensor:
        """Integrates the flow from `noise` [B,K,A] at t=1 to an action chunk [B,K,A] at t=0."""
        x, dt = noise, -1.0 / self.flow_steps
        for i in range(self.flow_steps):
            t = torch.full((x.shape[0],), 1.0 + i * dt, device=x.device)  # [B]
            x = x + dt * self.velocity(x, t, features)  # Euler step towards the data
        return x

    @staticmethod
    def sample_time(batch_size: int, device: torch.device) -> Tensor:
        """Training flow times [B] in [0.001, 1): pi0's Beta(1.5, 1), leaning towards noise."""
        beta = torch.distributions.Beta(torch.tensor(1.5), torch.tensor(1.0))
        return (beta.sample((batch_size,)) * 0.999 + 0.001).to(device)

    def loss(
        self, features: Tensor, target_norm: Tensor, is_pad: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        self.check_target(target_norm, is_pad)
        B = target_norm.shape[0]
        noise = torch.randn_like(target_norm)  # [B,K,A]
        t = self.sample_time(B, target_norm.device)  # [B]
        tt = t[:, None, None]  # [B] -> [B,1,1]
        x_t = tt * noise + (1 - tt) * target_norm  # on the straight path noise -> actions
        u_t = noise - target_norm  # its velocity (d x_t / dt)
        v_t = self.velocity(x_t, t, features)
        loss = mean_over_real_steps(F.mse_loss(v_t, u_t, reduction="none"), is_pad)
        return loss, {"flow_mse": loss.detach()}

    def reset(self) -> None:
        self._generator = None

    def _noise(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        if self._generator is None or self._generator.device != device:
            self._generator = torch.Generator(device=device).manual_seed(self.seed)
        return torch.randn(shape, generator=self._generator, device=device)

    def predict(self, features: Tensor) -> Tensor:
        noise = self._noise((features.shape[0], self.chunk_size, self.action_dim), features.device)
        return self.sample(features, noise.to(features.dtype)).clamp(-1.0, 1.0)  # [B,K,A]
