"""Autoregressive head: action tokens generated one dimension after another.

    position:   0                  1              ...   A-1
    input:      start(features)    emb(bin a_0)   ...   emb(bin a_{A-2})     (+ per-dim position)
                      │ causal Transformer block(s): position i sees only inputs 0..i │
    predicts:   a_0                a_1            ...   a_{A-1}

Like a language model decoding action tokens (RT-2, OpenVLA), each dimension is conditioned on
the ones already chosen, so correlated dimensions (e.g. "move diagonally") can be represented.
Training feeds the true previous bins (teacher forcing); inference decodes greedily.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.models.heads.base import BinnedActionHead, flatten_readouts
from vla.models.transformer import EncoderBlock


class AutoregressiveHead(BinnedActionHead):
    """Causal decoder over action bins.

    Args:
        d_model, action_dim, num_readouts: see `ActionHead`.
        num_bins: N, uniform bins over [-1,1] per action dimension.
        n_heads, mlp_ratio, dropout, attn_impl: of the causal block(s).
        depth: number of causal blocks.
    """

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_bins: int = 256,
        num_readouts: int = 1,
        n_heads: int = 4,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
        depth: int = 1,
    ):
        super().__init__(d_model, action_dim, num_bins, num_readouts)
        if depth < 1:
            raise ValueError(f"depth={depth} must be >= 1")
        self.start_proj = nn.Linear(num_readouts * d_model, d_model)  # [B,R*D] -> [B,D]
        self.bin_embed = nn.Embedding(num_bins, d_model)
        self.dim_pos = nn.Parameter(torch.randn(action_dim, d_model) * 0.02)  # [A,D]
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)
        self.to_logits = nn.Linear(d_model, num_bins)

    def forward(self, features: Tensor, prev_bins: Tensor) -> Tensor:
        """Logits for dimensions 0..k given the bins of dimensions 0..k-1.

        Args:
            features: readout features [B,R,D].
            prev_bins: int64 [B,k], 0 <= k < A: the bins already chosen (or the true ones).

        Returns:
            logits [B,k+1,N]; row i scores dimension i.
        """
        B, R, D = features.shape
        k = prev_bins.shape[1]
        if k >= self.action_dim:
            raise ValueError(f"prev_bins has {k} dims; at most action_dim-1={self.action_dim - 1}")
        start = self.start_proj(flatten_readouts(features))  # [B,R,D] -> [B,D]
        start = rearrange(start, "b d -> b 1 d")  # [B,D] -> [B,1,D]
        x = torch.cat([start, self.bin_embed(prev_bins)], dim=1)  # -> [B,k+1,D]
        x = x + self.dim_pos[: k + 1]  # [B,k+1,D] + [k+1,D]
        for block in self.blocks:
            x = block(x, causal=True)  # [B,k+1,D]
        return self.to_logits(self.norm(x))  # [B,k+1,D] -> [B,k+1,N]

    def loss_and_prediction(
        self, features: Tensor, target_norm: Tensor
    ) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        bins = self.encode(target_norm)  # [B,A]
        logits = self(features, bins[:, :-1])  # teacher forcing -> [B,A,N]
        ce = F.cross_entropy(rearrange(logits, "b a n -> (b a) n"), rearrange(bins, "b a -> (b a)"))
        logs = {"ce": ce.detach(), "bin_accuracy": self._accuracy(logits.detach(), bins)}
        with torch.no_grad():
            # greedy decoding, not the teacher-forced argmax, so the metric matches inference
            pred = self.predict(features.detach())
        return ce, logs, pred

    def predict(self, features: Tensor) -> Tensor:
        B = features.shape[0]
        bins = torch.zeros(B, 0, dtype=torch.long, device=features.device)  # [B,0]
        for _ in range(self.action_dim):
            next_bin = self(features, bins)[:, -1].argmax(dim=-1)  # [B,k+1,N] -> [B]
            bins = torch.cat([bins, next_bin[:, None]], dim=1)  # [B,k] -> [B,k+1]
        return self.decode(bins)  # [B,A]

    def flops(self) -> int:
        """One teacher-forced pass over the A positions (what training runs)."""
        R, D, A, N = self.num_readouts, self.d_model, self.action_dim, self.num_bins
        blocks = sum(block.flops(A) for block in self.blocks)
        return 2 * R * D * D + blocks + 2 * A * D * N
