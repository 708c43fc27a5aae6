"""Examples as prefix + suffix tensors, and batches that mix corpus and demonstrations.

    corpus example   prefix: image, question words, no state   suffix: <bos> answer ... -> answer <eos>
    demonstration    prefix: image, instruction, state          suffix: <bos> t_1 .. t_{KA-1} -> t_1 .. t_KA

Both become the same batch keys (`BATCH_KEYS`); `MixedBatches` draws `cotrain_ratio` of every
batch from the corpus and the rest from the demonstrations (RT-2's co-fine-tuning; 1 when there
are no demonstrations, stage 1), pads to the longest prefix words and suffix, and concatenates.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from vla.data.chunks import chunk_indices
from vla.models.language import PAD_ID
from vla.vlm.actions import ActionBins
from vla.vlm.questions import FAMILIES
from vla.vlm.vocab import VLMTokenizer

IMAGE, STATE, TOKENS, HAS_STATE = "image", "state", "tokens", "has_state"
SUFFIX, TARGETS, FAMILY, CENTRE = "suffix", "targets", "family", "centre"
TARGETED = "targeted"  # whether CENTRE is the centre of a shape the example is about
ANCHOR, ANCHORED = "anchor", "anchored"  # the shape a relation is measured from, if any
BATCH_KEYS = (
    IMAGE, STATE, TOKENS, HAS_STATE, SUFFIX, TARGETS, FAMILY, CENTRE, TARGETED, ANCHOR, ANCHORED
)  # fmt: skip
ACTION_FAMILY = -1  # FAMILY of a demonstration step


def _rows(ids: list[list[int]]) -> Tensor:
    """Target rows (answers ending in <eos>) -> targets [E,S], PAD-padded."""
    S = max(len(r) for r in ids)
    targets = torch.full((len(ids), S), PAD_ID, dtype=torch.long)
    for i, r in enumerate(ids):
        targets[i, : len(r)] = torch.tensor(r)
    return targets


class CorpusTensors:
    """A corpus as tensors: scene images stay one per scene, examples index them."""

    def __init__(self, corpus: dict, tokenizer: VLMTokenizer, state_dim: int = 4):
        self.image = torch.from_numpy(corpus["image"])  # [N,H,W,3]
        self.scene = torch.from_numpy(corpus["scene"])  # [E]
        self.family = torch.from_numpy(corpus["family"])  # [E]
        centres = corpus["centres"][corpus["scene"], np.maximum(corpus["target"], 0)]
        self.centre = torch.from_numpy(centres.astype(np.float32))  # [E,2]
        self.targeted = torch.from_numpy(corpus["target"] >= 0)  # [E]
        anchors = corpus["centres"][corpus["scene"], np.maximum(corpus["anchor"], 0)]
        self.anchor = torch.from_numpy(anchors.astype(np.float32))  # [E,2]
        self.anchored = torch.from_numpy(corpus["anchor"] >= 0)  # [E]
        self.tokens = tokenizer.encode(list(corpus["question"]))  # [E,L]
        answers = [
            tokenizer.point_text(c) if a == "point" else str(a)
            for a, c in zip(corpus["answer"], centres, strict=True)
        ]
        self.answers = answers
        self.targets = _rows([tokenizer.answer_ids(a) for a in answers])  # [E,S]
        self.bos, self.state_dim = tokenizer.bos_id, state_dim

    def __len__(self) -> int:
        return len(self.scene)

    def batch(self, idx: Tensor) -> dict[str, Tensor]:
        B = len(idx)
        targets = self.targets[idx]  # [B,S]
        return {
            IMAGE: self.image[self.scene[idx]],
            STATE: torch.zeros(B, self.state_dim),
            TOKENS: self.tokens[idx],
            HAS_STATE: torch.zeros(B, dtype=torch.bool),
            SUFFIX: shift_right(targets, self.bos),
            TARGETS: targets,
            FAMILY: self.family[idx],
            CENTRE: self.centre[idx],
            TARGETED: self.targeted[idx],
            ANCHOR: self.anchor[idx],
            ANCHORED: self.anchored[idx],
        }


class DemoTensors:
    """Demonstration steps with their action chunks as K*A tokens (padded steps: PAD)."""

    def __init__(self, demos, tokenizer: VLMTokenizer, bins: ActionBins, chunk_size: int):
        self.image = torch.from_numpy(np.array(demos.image))  # [N,H,W,3], a copy
        self.state = torch.from_numpy(np.array(demos.state))  # [N,S]
        action = torch.from_numpy(np.array(demos.action))  # [N,A]
        self.episode = torch.from_numpy(np.asarray(demos.episode, dtype=np.int64))  # [N]
        self.episode_tokens = tokenizer.encode(list(demos.instructions))  # [E,L]
        index, is_pad = chunk_indices(self.episode, chunk_size)  # [N,K]
        tokens = bins.to_tokens(action[index], tokenizer.action_start)  # [N,K,A] -> [N,K*A]
        pad = is_pad.repeat_interleave(bins.action_dim, dim=1)  # [N,K] -> [N,K*A]
        self.targets = tokens.masked_fill(pad, PAD_ID)  # [N,K*A]
        self.target = torch.from_numpy(np.array(demos.target_position))  # [N,2], privileged
        self.bos = tokenizer.bos_id

    def __len__(self) -> int:
        return len(self.episode)

    def batch(self, idx: Tensor) -> dict[str, Tensor]:
        B = len(idx)
        targets = self.targets[idx]
        return {
            IMAGE: self.image[idx],
            STATE: self.state[idx],
            TOKENS: self.episode_tokens[self.episode[idx]],
            HAS_STATE: torch.ones(B, dtype=torch.bool),
            SUFFIX: shift_right(targets, self.bos),
            TARGETS: targets,
            FAMILY: torch.full((B,), ACTION_FAMILY),
            CENTRE: self.target[idx],
            TARGETED: torch.ones(B, dtype=torch.bool),
            ANCHOR: torch.zeros(B, 2),  # the demonstrations do not say what a relation is from
            ANCHORED: torch.zeros(B, dtype=torch.bool),
        }


def shift_right(targets: Tensor, bos: int) -> Tensor:
    """Targets [B,S] -> decoder inputs [B,S]: <bos>, then the targets but the last."""
    return torch.cat([torch.full_like(targets[:, :1], bos), targets[:, :-1]], dim=1)


def collate(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Concatenates batch parts, PAD-padding TOKENS, SUFFIX and TARGETS to the longest."""
    out = {}
    for key in BATCH_KEYS:
        xs = [p[key] for p in parts]
        if key in (TOKENS, SUFFIX, TARGETS):
            n = max(x.shape[1] for x in xs)
            xs = [torch.nn.functional.pad(x, (0, n - x.shape[1]), value=PAD_ID) for x in xs]
        out[key] = torch.cat(xs)
    return out


class MixedBatches:
    """`steps` batches per epoch: round(batch_size * cotrain_ratio) corpus examples (all of
    them without demonstrations), the rest demonstration steps, drawn with replacement by a
    generator seeded by (seed, epoch), so runs repeat.

    Args:
        corpus, corpus_idx: corpus tensors and the examples to draw from (None: none).
        demos, demo_idx: demonstration tensors and the steps to draw from (None: none).
    """

    def __init__(self, corpus, corpus_idx, demos, demo_idx, batch_size, cotrain_ratio, steps, seed):
        if corpus is None and demos is None:
            raise ValueError("MixedBatches needs a corpus or demonstrations")
        self.corpus, self.corpus_idx = corpus, corpus_idx
        self.demos, self.demo_idx = demos, demo_idx
        n_corpus = batch_size if demos is None else round(batch_size * cotrain_ratio)
        self.n_corpus = 0 if corpus is None else n_corpus
        self.n_demo = batch_size - self.n_corpus
        self.steps, self.seed, self.epoch = steps, seed, 0

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        self.epoch += 1
        for _ in range(self.steps):
            parts = []
            if self.n_corpus:
                pick = torch.randint(len(self.corpus_idx), (self.n_corpus,), generator=gen)
                parts.append(self.corpus.batch(self.corpus_idx[pick]))
            if self.n_demo:
                pick = torch.randint(len(self.demo_idx), (self.n_demo,), generator=gen)
                parts.append(self.demos.batch(self.demo_idx[pick]))
            yield collate(parts)


class FixedBatches:
    """Evaluation batches, in order, as one loader (a plain list would be read by Lightning
    as a list of loaders)."""

    def __init__(self, batches: list[dict[str, Tensor]]):
        self.batches = batches

    def __add__(self, other: FixedBatches) -> FixedBatches:
        return FixedBatches(self.batches + other.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def fixed_batches(source, idx: Tensor, batch_size: int) -> FixedBatches:
    """Evaluation batches of `source` over `idx`, in order."""
    return FixedBatches(
        [source.batch(idx[i : i + batch_size]) for i in range(0, len(idx), batch_size)]
    )


def family_names(family: Tensor) -> list[str]:
    return [FAMILIES[f] if f >= 0 else "action" for f in family.tolist()]
