"""VLAPolicy: image + instruction + state -> action chunk, through one Transformer over all
their tokens.

    tokens [B,L] ─ TextEncoder ─> words [B,L,D] ─ mean over real words ─> instruction [B,D]
    image [B,H,W,3] ─ ImageEncoder (+ FiLM by the instruction) ─> patches [B,Np,D]
    image, instruction ─ token sources (keypoints, objects) ─> [B,N,D] each
    state [B,S] ─ normalise ─ StateEncoder ─> [B,1,D]
    readout queries ─> [B,R,D]
        each group + its type embedding, concatenated ─> [B,T,D]
        ─ TransformerEncoder (PAD words masked as keys) ─ Readout ─> features [B,R,D]
        ─ head: loss against the normalised action chunk, or predict ─ unnormalise ─> [B,K,A]

A chunk is this step's action and the K-1 after it (K = `chunk_size`, ACT). Each part's
config node is a Hydra partial holding only its own settings; the policy calls it with the
sizes its constructor names (`build_part`), so `model.d_model=64` reaches every part and no two
parts can disagree about a size. Research enters as a token source (`vla.models.vision.TokenSource`);
losses on privileged information belong to the recipe (`vla.training.module.BCModule`).
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from vla import keys
from vla.errors import ConfigError
from vla.models.heads.base import ActionHead, action_chunk
from vla.models.language import TextEncoder, Tokenizer, masked_mean
from vla.models.state import Normalizer, StateEncoder
from vla.models.transformer import Readout, TransformerEncoder
from vla.models.vision import FiLM, ImageEncoder, build_sources
from vla.pretrained.mixin import PretrainedMixin

Part = Callable[..., nn.Module]  # a part's partial, called with the sizes it shares

# what VLAPolicy hands every part whose constructor names it
SHARED_SIZES = (
    "image_size", "state_dim", "action_dim", "d_model", "n_heads", "mlp_ratio", "dropout",
    "attn_impl", "pos_emb", "num_readouts", "chunk_size",
)  # fmt: skip


def build_part(name: str, part: Part, shared: dict, **given) -> nn.Module:
    """`part(**sizes)`: the entries of `shared` its constructor names, plus `given`. Refuses
    a node that sets one of those itself (its home is `model.<key>`, or the policy) or names
    an argument the constructor does not take."""
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


class Encoding(NamedTuple):
    """What `VLAPolicy.encode` computes for a batch."""

    features: Tensor  # readout features [B,R,D]
    outputs: dict[str, Tensor]  # the token sources' outputs, e.g. "keypoints_xy" [B,K,2]
    weights: list[Tensor] | None = None  # attention weights, when asked (see `encode`)


class VLAPolicy(PretrainedMixin, nn.Module):
    """Vision-language-action policy trained by behavior cloning.

    Args:
        tokenizer, image_encoder, text_encoder, state_encoder, encoder, readout, head: the
            parts, as partials (conf/model/small.yaml names each one's class).
        image_size, state_dim, action_dim: the env's image side (px), state and action sizes.
        d_model, n_heads, depth, mlp_ratio, dropout, attn_impl, pos_emb: what the parts
            share (depth: the encoder's blocks).
        max_words: most words an instruction may have (None: the grammar's longest).
        num_readouts, chunk_size: R action queries; K actions predicted per observation.
        n_action_steps: N, actions of each chunk executed before the next query (1 <= N <= K).
        film: FiLM of the patches by the pooled instruction (None: off).
        **sources: token sources by name (`model.keypoints`; None: off), after the patches.
    """

    def __init__(
        self,
        *,
        tokenizer: Part,
        image_encoder: Part,
        text_encoder: Part,
        state_encoder: Part,
        encoder: Part,
        readout: Part,
        head: Part,
        image_size: int,
        state_dim: int,
        action_dim: int,
        d_model: int,
        n_heads: int,
        depth: int,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
        pos_emb: str = "learned",
        max_words: int | None = None,
        num_readouts: int = 1,
        chunk_size: int = 1,
        n_action_steps: int = 1,
        film: Part | None = None,
        **sources: Part | None,
    ):
        super().__init__()
        if chunk_size < 1:
            raise ConfigError(f"chunk_size={chunk_size} must be >= 1")
        if not 1 <= n_action_steps <= chunk_size:
            raise ConfigError(
                f"n_action_steps={n_action_steps} must be between 1 and chunk_size={chunk_size}"
            )
        self.n_action_steps, self.d_model = n_action_steps, d_model
        self.action_dim, self.chunk_size = action_dim, chunk_size
        values = locals()
        build = functools.partial(build_part, shared={k: values[k] for k in SHARED_SIZES})
        self.tokenizer: Tokenizer = build("tokenizer", tokenizer, max_len=max_words)
        self.image_encoder: ImageEncoder = build("image_encoder", image_encoder)
        self.text_encoder: TextEncoder = build(
            "text_encoder",
            text_encoder,
            vocab_size=self.tokenizer.vocab_size,
            max_len=self.tokenizer.max_len,
            then_id=self.tokenizer.word_to_id.get("then"),
        )
        self.state_encoder: StateEncoder = build("state_encoder", state_encoder)
        self.film: FiLM | None = None if film is None else build("film", film)
        self.sources = build_sources(sources, build)  # e.g. keypoints
        self.encoder: TransformerEncoder = build("encoder", encoder, depth=depth)
        self.readout: Readout = build("readout", readout)
        self.head: ActionHead = build("head", head)
        self.normalizer = Normalizer(state_dim, action_dim)
        # one vector per token group, so attention can tell a patch from a word from the state
        self.type_embed = nn.ParameterDict(
            {g: nn.Parameter(torch.randn(d_model) * 0.02) for g in self.token_layout()}
        )

    def token_layout(self, num_words: int | None = None) -> dict[str, slice]:
        """Where each group sits in the encoder's sequence (words: tokenizer.max_len by default)."""
        sizes = {"image": self.image_encoder.num_patches}
        sizes |= {name: source.num_tokens for name, source in self.sources.items()}
        sizes["text"] = self.tokenizer.max_len if num_words is None else num_words
        sizes["state"] = 1
        if self.readout.in_sequence:
            sizes["readout"] = self.readout.num_readouts
        starts = itertools.accumulate(sizes.values(), initial=0)
        return {name: slice(a, a + n) for (name, n), a in zip(sizes.items(), starts, strict=False)}

    def num_tokens(self, num_words: int | None = None) -> int:
        """The encoder's sequence length for instructions of `num_words` words."""
        return max(s.stop for s in self.token_layout(num_words).values())

    def encode(
        self, image: Tensor, state: Tensor, tokens: Tensor, need_weights: bool = False
    ) -> Encoding:
        """Image uint8 [B,H,W,3], env-unit state [B,S], PAD-padded ids [B,L] -> features
        [B,R,D] and the token sources' outputs; with `need_weights` also the attention weights
        (each encoder layer's [B,H,T,T], then a "cross" readout's [B,H,R,T])."""
        B, L = tokens.shape
        words, pad_mask = self.text_encoder(tokens)  # [B,L] -> [B,L,D], [B,L] (True = PAD)
        instruction = masked_mean(words, pad_mask)  # [B,L,D] -> [B,D]
        groups = {"image": self.image_encoder(image, self.film, instruction)}  # [B,Np,D]
        outputs = {}
        for name, source in self.sources.items():  # e.g. keypoints [B,K,D]
            groups[name], found = source(image, instruction)
            outputs |= found
        groups["text"] = words  # [B,L,D]
        groups["state"] = self.state_encoder(self.normalizer.normalize_state(state))  # [B,1,D]
        if self.readout.in_sequence:
            groups["readout"] = self.readout.query_tokens(B)  # [B,R,D]
        x = torch.cat([x + self.type_embed[name] for name, x in groups.items()], dim=1)  # [B,T,D]
        mask = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)  # [B,T], True = PAD
        layout = self.token_layout(L)
        mask[:, layout["text"]] = pad_mask  # only words are ever padding

        encoded = self.encoder(x, mask, need_weights=need_weights)  # [B,T,D]
        encoded, weights = encoded if need_weights else (encoded, None)
        features = self.readout(encoded, mask, need_weights=need_weights)  # [B,R,D]
        if need_weights:
            features, cross = features
            weights += [cross] if cross is not None else []
        for name, source in self.sources.items():  # a source may read the features too
            features = source.read(features, encoded[:, layout[name]], outputs)
        return Encoding(features, outputs, weights)

    def forward(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Behavior-cloning loss on a batch (keys from `vla.keys`; actions in env units)."""
        features = self.encode(batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]).features
        return self.action_loss(features, batch)

    def action_loss(self, features: Tensor, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict]:
        """The head's loss (and detached logs) of readout features [B,R,D] against ACTION [B,A]
        or [B,K,A] chunks, ignoring the steps ACTION_IS_PAD [B,K] marks past an episode."""
        chunk, is_pad = action_chunk(batch)  # [B,K,A], [B,K] | None; the head checks K
        target = self.normalizer.normalize_action(chunk)  # env units -> [-1,1], [B,K,A]
        return self.head.loss(features, target, is_pad)

    def predict_chunk(self, features: Tensor) -> Tensor:
        """Readout features [B,R,D] -> action chunks [B,K,A] in env units, clipped to [-1,1]."""
        return self.normalizer.unnormalize_action(self.head.predict(features)).clamp(-1.0, 1.0)

    def predict_chunk_tensors(self, image: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """`encode`'s inputs -> action chunks [B,K,A] in env units, in eval mode without
        autograd (stateless: `select_action` and `PolicyRunner` execute them step by step)."""
        with self.inference():
            return self.predict_chunk(self.encode(image, state, tokens).features)
