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

    tokenizer       text <-> ids, vocabulary saved in the state_dict
    positions       sinusoidal / learned 1-D and 2-D position embeddings
    attention       multi-head attention by hand + the SDPA fast path
    transformer     pre-norm encoder blocks
    image_encoder   uint8 image -> patch tokens (+ coordinate channels, FiLM by the instruction)
    text_encoder    ids -> word tokens + PAD mask, and the pooled instruction
    state_encoder   state -> one token
    sources         the seam for token groups beyond patches, words and state
    keypoints       spatial-softmax keypoint tokens (where learned detectors fire): a source
    objects         object tokens with a pointer (experiment=objects): a source
    readout         learned action queries (self- or cross-attention)
    heads           continuous / discrete / autoregressive / flow action heads
    normalizer      state and action statistics as buffers
    policy          VLAPolicy, composing all of the above
    pretrained      save_pretrained / from_pretrained / select_action
    chunking        which chunk-execution settings a policy accepts (training and eval)
    flops           FLOPs of a training step and of a query, counted by torch
"""

from vla.models.attention import MultiHeadAttention, scaled_dot_product
from vla.models.heads import (
    ActionHead,
    AutoregressiveHead,
    ContinuousHead,
    DiscreteHead,
    FlowHead,
)
from vla.models.image_encoder import FiLM, ImageEncoder
from vla.models.keypoints import KeypointEncoder
from vla.models.normalizer import Normalizer
from vla.models.policy import VLAPolicy
from vla.models.positions import PositionEmbedding1D, PositionEmbedding2D
from vla.models.readout import Readout
from vla.models.state_encoder import StateEncoder
from vla.models.text_encoder import TextEncoder
from vla.models.tokenizer import Tokenizer
from vla.models.transformer import EncoderBlock, TransformerEncoder

__all__ = [
    "ActionHead",
    "AutoregressiveHead",
    "ContinuousHead",
    "DiscreteHead",
    "EncoderBlock",
    "FlowHead",
    "FiLM",
    "ImageEncoder",
    "KeypointEncoder",
    "MultiHeadAttention",
    "Normalizer",
    "PositionEmbedding1D",
    "PositionEmbedding2D",
    "Readout",
    "StateEncoder",
    "TextEncoder",
    "Tokenizer",
    "TransformerEncoder",
    "VLAPolicy",
    "scaled_dot_product",
]
