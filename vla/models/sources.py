"""Token sources: the one seam through which a part adds a group of tokens to the sequence.

    image [B,H,W,3], pooled instruction [B,D] ─ source ─> TokenGroup(tokens [B,N,D], outputs)
                 ... encoder ... ─> features [B,R,D] ─ source.read(features, its encoded tokens)

A source is any `model.<name>` node whose class derives from `TokenSource` (keypoints and
object tokens are two): the policy builds it with the sizes it shares, appends its N tokens
after the patches under a type embedding of its own, and hands back its `outputs` (positions,
logits) in `Encoding.outputs`, where training-only losses read them. After the encoder a
source may also `read` the readout features (the object pointer adds where it points). Octo
builds its observation the same way, from a list of tokenizers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

from torch import Tensor, nn

from vla.errors import ConfigError


class TokenGroup(NamedTuple):
    """What a token source adds: tokens [B,N,D] and named outputs for losses and figures."""

    tokens: Tensor
    outputs: dict[str, Tensor]


class TokenSource(nn.Module, ABC):
    """A part that adds `num_tokens` tokens to the policy's sequence.

    Subclasses set `num_tokens` and implement `forward(image, instruction) -> TokenGroup`.
    """

    num_tokens: int

    @abstractmethod
    def forward(self, image: Tensor, instruction: Tensor) -> TokenGroup:
        """image uint8 [B,H,W,3], pooled instruction [B,D] -> TokenGroup."""

    def read(self, features: Tensor, encoded: Tensor, outputs: dict[str, Tensor]) -> Tensor:
        """Readout features [B,R,D], given this source's tokens after the encoder [B,N,D] and
        its outputs (which it may add to) -> features [B,R,D]. Unchanged by default."""
        return features


def build_sources(parts: dict, build: Callable[[str, Callable], nn.Module]) -> nn.ModuleDict:
    """The token sources among the policy's further `model.<name>` nodes (None: off), each
    built by `build(name, part)`; a node that is no TokenSource is refused, naming it."""
    sources = nn.ModuleDict()
    for name, part in parts.items():
        cls = getattr(part, "func", part)
        if not (part is None or isinstance(cls, type) and issubclass(cls, TokenSource)):
            raise ConfigError(
                f"model.{name}: VLAPolicy takes no argument {name!r}, and it is no token "
                "source (a _target_ subclassing vla.models.sources.TokenSource)"
            )
        if part is not None:
            sources[name] = build(name, part)
    return sources
