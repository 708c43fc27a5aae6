"""The policy's parts get the sizes they share from one place: the policy's own arguments.

A part's config node is a Hydra partial (`_partial_: true`) holding only its own settings
(`model.readout.mode`, `model.head.flow_steps`); `VLAPolicy` calls it with the shared sizes its
constructor names (d_model, n_heads, chunk_size, ...) and with what follows from the parts built
before it (the text encoder's vocabulary is the tokenizer's). So `model.d_model=64` reaches every
part, and no part can disagree with another about a size.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from torch import nn

from vla.errors import ConfigError

Part = Callable[..., nn.Module]  # a part's partial, called with the sizes it shares

# what VLAPolicy hands every part whose constructor names it
SHARED_SIZES = (
    "image_size", "state_dim", "action_dim", "d_model", "n_heads", "mlp_ratio", "dropout",
    "attn_impl", "pos_emb", "num_readouts", "chunk_size",
)  # fmt: skip


def build_part(name: str, part: Callable[..., nn.Module], shared: dict, **given) -> nn.Module:
    """`part(**sizes)`, where sizes are the entries of `shared` its constructor names, plus
    `given` (values the policy computes for this part).

    Raises ConfigError when the part's node sets one of those values itself (it has one
    home: `model.<key>`, or the policy), or names an argument the constructor does not take.
    """
    if not callable(part):
        raise ConfigError(f"model.{name} must be a _target_ node with _partial_: true")
    func = part.func if isinstance(part, functools.partial) else part
    own = part.keywords if isinstance(part, functools.partial) else {}
    names = inspect.signature(func).parameters
    values = {k: v for k, v in shared.items() if k in names} | given
    for key in sorted(set(values) & set(own)):
        home = f"model.{key}" if key in shared else "the policy"
        raise ConfigError(f"model.{name}.{key}={own[key]!r} is set by {home}: remove it here")
    unknown = sorted(set(own) - set(names))
    if unknown and not any(p.kind == p.VAR_KEYWORD for p in names.values()):
        raise ConfigError(f"model.{name}: {func.__name__} takes no argument {unknown[0]!r}")
    return part(**values)
