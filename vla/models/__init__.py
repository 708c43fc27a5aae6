"""The policy network: pure `nn.Module`s (no Lightning, no Hydra).

Axis legend, used in shape comments ([B,T,D]) and einops patterns ("b t (h d)"):
    b   batch
    t   tokens in a sequence (Tq / Tk: the query / key side of attention; T_obs: without readouts)
    d   model width d_model (Dh = D / H: the width of one head)
    h   attention heads; in image code, rows of the patch grid (w: its columns)
    H,W image height and width in pixels; c image channels (3 RGB, +2 coordinate channels)
    p1, p2  pixel rows / columns inside one patch (P = patch_size); Np = number of patches
    l   instruction words (L <= the tokenizer's max_len: the longest instruction of a batch)
    s   state dims (S = 4: effector x, y, vx, vy)
    r   readout (action-query) tokens
    k   steps of an action chunk (K = chunk_size)
    a   action dims (A = 2)
    n   bins per action dim (N = num_bins)

The default policy reads in eight files, along the data flow:

    language     Tokenizer (text <-> ids) and TextEncoder (ids -> word tokens, PAD mask)
    vision       ImageEncoder (patches, FiLM) and the token sources: KeypointEncoder
    state        StateEncoder (one token) and Normalizer (env units <-> the policy's)
    attention    multi-head attention by hand + the SDPA fast path
    transformer  positions, pre-norm blocks, the readout (learned action queries)
    heads/       base (what a head offers, bins) and discrete, the default head
    policy       VLAPolicy, composing all of the above

    objects      object tokens with a pointer (experiment=objects): a token source
    heads/       continuous, autoregressive and flow, the other heads
"""

from vla.models.attention import MultiHeadAttention, scaled_dot_product
from vla.models.heads import (
    ActionHead,
    AutoregressiveHead,
    ContinuousHead,
    DiscreteHead,
    FlowHead,
)
from vla.models.language import TextEncoder, Tokenizer
from vla.models.policy import VLAPolicy
from vla.models.state import Normalizer, StateEncoder
from vla.models.transformer import EncoderBlock, PositionEmbedding, Readout, TransformerEncoder
from vla.models.vision import FiLM, ImageEncoder, KeypointEncoder, TokenSource

__all__ = [
    "ActionHead",
    "AutoregressiveHead",
    "ContinuousHead",
    "DiscreteHead",
    "EncoderBlock",
    "FiLM",
    "FlowHead",
    "ImageEncoder",
    "KeypointEncoder",
    "MultiHeadAttention",
    "Normalizer",
    "PositionEmbedding",
    "Readout",
    "StateEncoder",
    "TextEncoder",
    "TokenSource",
    "Tokenizer",
    "TransformerEncoder",
    "VLAPolicy",
    "scaled_dot_product",
]
