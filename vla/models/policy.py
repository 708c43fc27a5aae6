"""VLAPolicy: image + instruction + state -> action, with a Transformer over all their tokens.

    image [B,H,W,3] ─ ImageEncoder (FiLM(instruction) on content) ─> [B,Np,D] ─ + type ─┐
    image [B,H,W,3] ─ KeypointEncoder (spatial softmax) ─> keypoints [B,Nk,D] ─ + type ─┤
    image [B,H,W,3] ─ ObjectEncoder (slots, what + where) ─> objects [B,No,D] ─ + type ─┤
    tokens [B,L] ──── TextEncoder ──> words   [B,L,D] ────────────────────── + type ─┤ concat
    state [B,S] ─ normalise ─ StateEncoder ─> [B,1,D] ────────────────────── + type ─┤ [B,T,D]
    ("self" readout) learned queries [B,R,D] ─────────────────────────────── + type ─┘
                                                                                     │
                     TransformerEncoder (PAD words masked as keys) ─> Readout ─> [B,R,D]
                     (with a Pointer: + where the readout points among the objects)  │
                 head: loss vs normalised action chunk / predict ─> unnormalise ─> [B,K,A]

A chunk holds this step's action and the K-1 that follow it (K = `chunk_size`, ACT's action
chunking). The policy is stateless: `predict_chunk_tensors` turns observations into chunks,
and `vla.eval.runner.PolicyRunner` executes them in one env or many (`n_action_steps` of
each chunk, or ACT's temporal ensembling).

The parts arrive as Hydra partials, so each can be swapped from a config; the policy gives them
the sizes they share (`vla.models.parts`) and owns only what ties them together: the per-group
type embeddings, the token layout, and the conversions between env units and the network's
units. Losses that use privileged information (the target-keypoint loss) belong to the
training recipe (`vla.training.module.BCModule`), which reads the keypoints from `encode`'s
result. With a referent selector (`vla.models.referents`), the first referent not yet reached
stands for the pooled words wherever the instruction conditions vision; with a relational
keypoint (`vla.models.relations`), keypoint 0's scores also hear each pixel's offset from a
reference that keypoint 0 finds under the words that name it.

This file is longer than the others (about 330 lines) on purpose: the picture above, the
constructor and `encode` are one concept, the token sequence, and a reader follows a token
from its part to the readout without leaving it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import Tensor, nn

from vla import keys
from vla.errors import ConfigError
from vla.models.film import FiLM, masked_mean
from vla.models.heads import ActionHead
from vla.models.image_encoder import ImageEncoder
from vla.models.keypoints import KeypointEncoder
from vla.models.normalizer import Normalizer
from vla.models.objects import ObjectEncoder
from vla.models.parts import SHARED_SIZES, build_part
from vla.models.pointer import Pointer
from vla.models.readout import Readout
from vla.models.referents import ReferentSelector
from vla.models.relations import RelationalKeypoint
from vla.models.state_encoder import StateEncoder
from vla.models.text_encoder import TextEncoder
from vla.models.tokenizer import Tokenizer
from vla.models.transformer import TransformerEncoder

Part = Callable[..., nn.Module]  # a part's partial, called with the sizes it shares


class Encoding(NamedTuple):
    """What `VLAPolicy.encode` computes for a batch."""

    features: Tensor  # readout features [B,R,D]
    keypoints_xy: Tensor | None  # keypoints [B,K,2] in [-1,1] (None: no keypoint tokens)
    objects_xy: Tensor | None = None  # object slots [B,No,2] in [-1,1] (None: no objects)
    object_tokens: Tensor | None = None  # their tokens [B,No,D], before the encoder
    pointer_logits: Tensor | None = None  # [B,No] over the objects (None: no pointer)
    referents_xy: Tensor | None = None  # [B,R,2] each referent's keypoint (None: no selector)
    done_logits: Tensor | None = None  # [B,R] logit of P(each referent reached) (None: no selector)
    reference_xy: Tensor | None = None  # [B,2] a relation's reference (None: no relations)
    weights: list[Tensor] | None = None  # attention weights, when asked (see `encode`)


def action_chunk(batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor | None]:
    """A batch's target actions as chunks [B,K,A] (a [B,A] ACTION is K = 1) and ACTION_IS_PAD
    [B,K] (None: every step real)."""
    action = batch[keys.ACTION]
    chunk = action if action.dim() == 3 else action[:, None]  # [B,A] -> [B,1,A]
    return chunk, batch.get(keys.ACTION_IS_PAD)


class VLAPolicy(nn.Module):
    """Vision-language-action policy trained by behavior cloning.

    The parts arrive as partials (Hydra `_partial_: true`) holding their own settings; the
    policy builds each with the sizes below that its constructor names (`vla.models.parts`).

    Args:
        tokenizer: instruction text -> ids (its vocabulary is saved with the weights).
        image_encoder: image -> patch tokens.
        text_encoder: ids -> word tokens and PAD mask (its vocabulary is the tokenizer's).
        state_encoder: normalised state -> one token.
        encoder: the Transformer over the token sequence.
        readout: action queries ("self": in the sequence, "cross": attending to it).
        head: readout features -> normalised actions, and the training loss.
        image_size, state_dim, action_dim: the env's image side (px), state and action sizes.
        d_model, n_heads, mlp_ratio, dropout, attn_impl, pos_emb: token width and the
            Transformer settings every part with attention or positions shares.
        depth: blocks of the encoder.
        max_words: most words an instruction may have (None: the grammar's longest).
        num_readouts: R, action queries.
        chunk_size: K, actions predicted per observation (ACT's action chunk).
        n_action_steps: N, actions of each predicted chunk executed before the next query
            (1 <= N <= K): what the policy was trained for, and what `PolicyRunner` executes
            unless told otherwise.
        film: optional FiLM conditioning of the patches on the instruction (None: off).
        keypoints: optional spatial-softmax keypoint tokens, placed after the patches.
        objects: optional object tokens (what + where, not conditioned on the instruction),
            placed after the keypoints.
        pointer: optional pointer from the readout over the object tokens, whose pointed
            position is added to the readout features (needs `objects`).
        referents: optional selector of the first referent not yet reached, which then
            conditions the keypoints, FiLM and readout instead of all the words pooled
            (needs `keypoints` with film: their detector tells whether a referent is done).
        relations: optional relational keypoint: keypoint 0 scored by each pixel's offset
            from a reference found under the words that name it (needs `keypoints` with film).
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
        keypoints: Part | None = None,
        objects: Part | None = None,
        pointer: Part | None = None,
        referents: Part | None = None,
        relations: Part | None = None,
    ):
        super().__init__()
        if pointer is not None and objects is None:
            raise ConfigError("a pointer points at object tokens: it needs model/objects")
        if referents is not None and (keypoints is None or not keypoints.keywords.get("film")):
            raise ConfigError(
                "model/referents read keypoint maps: they need model/keypoints with film"
            )
        if relations is not None and (keypoints is None or not keypoints.keywords.get("film")):
            raise ConfigError(
                "model/relations bias keypoint 0: they need model/keypoints with film"
            )
        if chunk_size < 1:
            raise ConfigError(f"chunk_size={chunk_size} must be >= 1")
        if not 1 <= n_action_steps <= chunk_size:
            raise ConfigError(
                f"n_action_steps={n_action_steps} must be between 1 and chunk_size={chunk_size}"
            )
        self.n_action_steps = n_action_steps
        self.d_model = d_model
        values = locals()
        shared = {k: values[k] for k in SHARED_SIZES}  # the arguments of the same names
        build = functools.partial(build_part, shared=shared)
        optional = lambda name, part: None if part is None else build(name, part)  # noqa: E731
        self.tokenizer: Tokenizer = build("tokenizer", tokenizer, max_len=max_words)
        self.image_encoder: ImageEncoder = build("image_encoder", image_encoder)
        vocab = dict(vocab_size=self.tokenizer.vocab_size, max_len=self.tokenizer.max_len)
        self.text_encoder: TextEncoder = build("text_encoder", text_encoder, **vocab)
        self.state_encoder: StateEncoder = build("state_encoder", state_encoder)
        self.film: FiLM | None = optional("film", film)
        self.keypoints: KeypointEncoder | None = optional("keypoints", keypoints)
        self.objects: ObjectEncoder | None = optional("objects", objects)
        self.pointer: Pointer | None = optional("pointer", pointer)
        self.referents: ReferentSelector | None = None
        if referents is not None:  # the keypoints' detector, unless it has its own
            detector = dict(hidden=self.keypoints.hidden, kernel_size=self.keypoints.kernel_size)
            self.referents = build("referents", referents, **detector)
            if self.referents.keypoint >= self.keypoints.num_keypoints:
                raise ConfigError(
                    f"model.referents.keypoint={self.referents.keypoint} needs more than "
                    f"model.keypoints.num_keypoints={self.keypoints.num_keypoints} keypoints"
                )
        self.relations: RelationalKeypoint | None = optional("relations", relations)
        self.encoder: TransformerEncoder = build("encoder", encoder, depth=depth)
        self.readout: Readout = build("readout", readout)
        self.head: ActionHead = build("head", head)
        self.normalizer = Normalizer(state_dim, action_dim)
        # one vector per token group, so attention can tell a patch from a word from the state
        groups = ["image"] + (["keypoints"] if keypoints is not None else [])
        groups += (["objects"] if objects is not None else []) + ["text", "state"]
        groups += ["readout"] if self.readout.in_sequence else []
        self.type_embed = nn.ParameterDict(
            {g: nn.Parameter(torch.randn(d_model) * 0.02) for g in groups}
        )

    @property
    def action_dim(self) -> int:
        return self.head.action_dim

    @property
    def chunk_size(self) -> int:
        return self.head.chunk_size

    def reset(self) -> None:
        """Start of an evaluation: a sampling head restarts its noise stream, so the same
        evaluation draws the same noise every time it runs."""
        self.head.reset()

    def set_normalization(self, state_mean, state_std, action_low, action_high) -> None:
        """Store the training set's statistics (array-likes of length S, S, A, A)."""
        self.normalizer.set_stats(state_mean, state_std, action_low, action_high)

    def token_layout(self, num_words: int | None = None) -> dict[str, slice]:
        """Where each group sits in the encoder's sequence (words: tokenizer.max_len by default)."""
        sizes = {"image": self.image_encoder.num_patches}
        if self.keypoints is not None:
            sizes["keypoints"] = self.keypoints.num_keypoints
        if self.objects is not None:
            sizes["objects"] = self.objects.num_slots
        sizes["text"] = self.tokenizer.max_len if num_words is None else num_words
        sizes["state"] = 1
        if self.readout.in_sequence:
            sizes["readout"] = self.readout.num_readouts
        layout, start = {}, 0
        for name, size in sizes.items():
            layout[name] = slice(start, start + size)
            start += size
        return layout

    def num_tokens(self, num_words: int | None = None) -> int:
        """Length of the encoder's sequence (instructions of `num_words` words, by default the
        most the tokenizer keeps; batches are only as long as their longest instruction)."""
        return max(s.stop for s in self.token_layout(num_words).values())

    def encode(
        self, image: Tensor, state: Tensor, tokens: Tensor, need_weights: bool = False
    ) -> Encoding:
        """Readout features for a batch.

        Args:
            image: uint8 [B,H,W,3].
            state: env-unit state [B,S].
            tokens: int64 ids [B,L], PAD-padded.
            need_weights: also return the attention weights (encoder layers [B,H,T,T], then for
                a "cross" readout its weights [B,H,R,T]).

        Returns:
            Encoding: features [B,R,D], keypoints_xy [B,K,2] (with keypoint tokens),
            objects_xy [B,No,2] and pointer_logits [B,No] (with objects, a pointer),
            referents_xy [B,R,2] and done_logits [B,R] (with a selector), reference_xy [B,2]
            (with relations) and the weights (when asked).
        """
        B = image.shape[0]
        te = self.type_embed
        words, pad_mask = self.text_encoder(tokens)  # [B,L] -> [B,L,D], [B,L]
        pooled = self.readout.instruction_query or self.encoder.film or self.keypoints is not None
        pooled = pooled and self.referents is None  # the selector gives its own vector
        instruction = masked_mean(words, pad_mask) if pooled else None  # [B,L,D] -> [B,D]
        hidden = self.keypoints.features(image) if self.keypoints is not None else None
        done = referents_xy = None
        said, said_mask = words, pad_mask  # what conditions vision
        if self.referents is not None:  # the first referent not reached, for all the words
            instruction, done, referents_xy = self.referents.select(
                words, tokens, self.keypoints, hidden, image
            )
            said, said_mask = instruction[:, None], pad_mask[:, :1] & False  # [B,1,D], [B,1]
        film = None
        if self.film is not None:  # the instruction scales and shifts what each patch shows
            film = lambda content: self.film(content, said, said_mask)  # noqa: E731
        patches = self.image_encoder(image, modulate=film)  # [B,H,W,3] -> [B,Np,D]
        state_tok = self.state_encoder(self.normalizer.normalize_state(state))  # [B,S] -> [B,1,D]
        visible = torch.zeros(B, 1, dtype=torch.bool, device=image.device)
        seq, masks = [patches + te["image"]], [visible.expand(B, patches.shape[1])]
        xy = reference_xy = bias = None
        if self.relations is not None:  # keypoint 0 under the reference's words, then biased
            said_reference = self.relations.reference(words, pad_mask)  # [B,D]
            reference_xy = self.keypoints.locate(hidden, said_reference, num=1)[0][:, 0]  # [B,2]
            bias = self.relations(self.keypoints.grid_xy, reference_xy, instruction)  # [B,H*W]
        if self.keypoints is not None:
            xy, _ = self.keypoints.locate(hidden, instruction, bias=bias)  # [B,H*W,C] -> [B,K,2]
            points = self.keypoints.embed(xy)  # [B,K,2] -> [B,K,D]
            seq.append(points + te["keypoints"])
            masks.append(visible.expand(B, points.shape[1]))
        objects_xy = objects = None
        if self.objects is not None:
            objects, objects_xy = self.objects(image)  # [B,H,W,3] -> [B,No,D], [B,No,2]
            seq.append(objects + te["objects"])
            masks.append(visible.expand(B, objects.shape[1]))
        seq += [words + te["text"], state_tok + te["state"]]
        masks += [pad_mask, visible]
        if self.readout.in_sequence:
            seq.append(self.readout.query_tokens(B, instruction) + te["readout"])  # [B,R,D]
            masks.append(visible.expand(B, self.readout.num_readouts))
        x = torch.cat(seq, dim=1)  # -> [B,T,D]
        mask = torch.cat(masks, dim=1)  # -> [B,T], True = PAD

        weights = None
        if not need_weights:
            x = self.encoder(x, mask, cond=instruction)  # [B,T,D]
            features = self.readout(x, mask, instruction=instruction)  # [B,T,D] -> [B,R,D]
        else:
            x, weights = self.encoder(x, mask, need_weights=True, cond=instruction)
            features, cross = self.readout(x, mask, need_weights=True, instruction=instruction)
            weights += [cross] if cross is not None else []
        logits = None
        if self.pointer is not None:  # the readout picks an object; its position joins in
            objects_out = x[:, self.token_layout(tokens.shape[1])["objects"]]  # [B,No,D]
            logits, pointed = self.pointer(features, objects_out, objects_xy)  # [B,No], [B,D]
            features = features + pointed[:, None]  # [B,R,D]
        return Encoding(
            features, xy, objects_xy, objects, logits, referents_xy, done, reference_xy, weights
        )

    def forward(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Behavior-cloning loss on a batch (keys from `vla.keys`; actions in env units)."""
        features = self.encode(batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]).features
        return self.action_loss(features, batch)

    def action_loss(
        self, features: Tensor, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The head's loss of readout features [B,R,D] against the batch's actions.

        ACTION is [B,A] (one action per step, chunk_size 1) or [B,K,A] chunks, with
        ACTION_IS_PAD [B,K] marking the steps past an episode's end, which the loss ignores.

        Returns:
            scalar loss and the head's detached scalar logs.
        """
        chunk, is_pad = action_chunk(batch)  # [B,K,A], [B,K] | None; the head checks K
        target = self.normalizer.normalize_action(chunk)  # env units -> [-1,1], [B,K,A]
        return self.head.loss(features, target, is_pad)

    def predict_chunk(self, features: Tensor) -> Tensor:
        """Readout features [B,R,D] -> action chunks [B,K,A] in env units, clipped to [-1,1]."""
        return self.normalizer.unnormalize_action(self.head.predict(features)).clamp(-1.0, 1.0)

    def predict_chunk_tensors(self, image: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """The inference API: observations (image uint8 [B,H,W,3], env-unit state [B,S], ids
        [B,L]) -> action chunks [B,K,A] in env units, clipped to [-1,1] (eval mode, no
        autograd). Stateless: one query, nothing kept (a sampling head advances its noise
        stream); `vla.eval.runner.PolicyRunner` turns chunks into one action per step."""
        with self.inference():
            return self.predict_chunk(self.encode(image, state, tokens).features)

    @contextmanager
    def inference(self):
        """Eval mode and no autograd inside; the previous mode is restored after."""
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                yield
        finally:
            self.train(was_training)
