"""The VLM's data as a Lightning data module: the corpus (stage 1), and the demonstrations as
action tokens beside it (stage 2), so `train()` runs both stages as it runs every policy.

    stage 1 (data.actions=false)  corpus ─ MixedBatches (all corpus) ──────────────┐
    stage 2 (data.actions=true)   demonstrations + corpus (data.cotrain_ratio) ─────┴─> batches
    validation                    validation scenes (data.val_scenes), held-out episodes' steps
    evaluate(policy)              answers on every held-out scene, per family (metrics.json)

Validation (checkpoint selection, early stopping) and the reported answers use scenes from two
different generator seeds, so nothing that picks the weights sees the scenes that score them.

Answers are written in the trained policy's vocabulary and actions in its bins, so `setup`
reads the policy from the module being trained (`trainer.lightning_module.policy`); the
bins are fitted there to the training actions (OpenVLA: 1st-99th percentile), a statistic of
the data like the normaliser's, which `statistics()` gives the module.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from vla.data.prepare import ensure_demos
from vla.envs.config import env_kwargs_of
from vla.envs.grammar import PAIRS
from vla.errors import ConfigError
from vla.vlm.corpus import CorpusConfig, ensure_corpus
from vla.vlm.data import CorpusTensors, DemoTensors, MixedBatches, fixed_batches
from vla.vlm.scoring import per_family

log = logging.getLogger(__name__)


def corpus_config(node) -> CorpusConfig:
    """A `data.corpus`-like node (DictConfig or dict) -> CorpusConfig."""
    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    unknown = sorted(set(plain) - set(CorpusConfig.__dataclass_fields__))
    if unknown:  # e.g. a run's metrics.json, written by another version of the code
        raise ConfigError(f"corpus keys {unknown} are not options of this version's corpus")
    return CorpusConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()})


class VLMDataModule(L.LightningDataModule):
    """Corpus examples and demonstration steps as prefix + suffix batches (`vla.vlm.data`).

    Args:
        env: the env config; its demonstrations are stage 2's, its held-out pairs are the
            ones `evaluate` reports apart.
        dir: root folder of cached corpora and demonstrations.
        corpus, eval_corpus: the training corpus and the held-out scenes (`CorpusConfig`).
        actions: demonstrations as action tokens too (stage 2).
        cotrain_ratio: the corpus share of every stage-2 batch (0: demonstrations only).
        batch_size, steps_per_epoch: batches are drawn with replacement, this many an epoch.
        val_scenes, val_seed: validation scenes, drawn as the training corpus's from another
            seed; scored at every validation, they select checkpoints and stop early.
        num_episodes, seed, noise_std, val_episodes: the demonstrations, as `conf/data/default`.
        rollouts: whether there is an env to roll out in (stage 2); `configure` sets it.
        tokenize, shuffle_seed, chunk_size, target, objects: what `train()` hands every data
            module; the tokenizer comes with the policy in `setup`, `target` and `objects` ask
            for nothing a VLM batch lacks.
    """

    def __init__(
        self, env: dict, corpus: dict, eval_corpus: dict, dir: str = "data",
        actions: bool = False, cotrain_ratio: float = 1.0, batch_size: int = 32,
        steps_per_epoch: int = 1500, val_scenes: int = 64,
        val_seed: int = 1_200_000_000, num_episodes: int = 3000,
        seed: int = 0, noise_std: float = 0.3, val_episodes: int = 100, rollouts: bool = False,
        tokenize=None, shuffle_seed: int = 0, chunk_size: int = 1, target: bool = False,
        objects: bool = False,
    ):  # fmt: skip
        super().__init__()
        if not 0.0 <= cotrain_ratio <= 1.0:
            raise ConfigError(f"data.cotrain_ratio={cotrain_ratio} must be in [0, 1]")
        for name, value in dict(batch_size=batch_size, steps_per_epoch=steps_per_epoch).items():
            if value < 1:
                raise ConfigError(f"data.{name}={value} must be >= 1")
        if actions and not 0 < val_episodes < num_episodes:
            raise ConfigError(
                f"data.val_episodes={val_episodes} must be in [1, data.num_episodes={num_episodes})"
            )
        self.env_kwargs = env_kwargs_of(env)
        self.corpus_cfg, self.eval_cfg = corpus_config(corpus), corpus_config(eval_corpus)
        if val_seed in (self.corpus_cfg.seed, self.eval_cfg.seed):
            raise ConfigError(
                f"data.val_seed={val_seed} must differ from the training corpus's and the "
                "held-out scenes' seeds: validation scenes would be scenes it trains on or reports"
            )
        self.val_cfg = replace(self.corpus_cfg, num_scenes=val_scenes, seed=val_seed)
        self.dir, self.actions, self.cotrain_ratio = dir, actions, cotrain_ratio
        self.batch_size, self.steps_per_epoch = batch_size, steps_per_epoch
        self.shuffle_seed = shuffle_seed
        self.chunk_size = chunk_size
        self.num_episodes, self.seed, self.noise_std = num_episodes, seed, noise_std
        self.val_episodes = val_episodes
        self.raw: dict = {}
        self.prepare_seconds = 0.0
        self.train_c = self.eval_c = self.val_c = self.demos = None

    @classmethod
    def configure(cls, cfg) -> None:
        """Stage 1 has no env to roll out in: `data.rollouts` follows `data.actions`."""
        cfg.data.rollouts = bool(cfg.data.actions)

    def prepare_data(self) -> None:
        """Generates the corpora (and collects the demonstrations) when missing, once."""
        if self.raw:
            return
        start = time.perf_counter()
        self.raw["corpus"] = ensure_corpus(self.dir, self.corpus_cfg)
        self.raw["eval"] = ensure_corpus(self.dir, self.eval_cfg)
        self.raw["val"] = ensure_corpus(self.dir, self.val_cfg)
        log.info(
            f"corpus: {self.raw['corpus']['manifest']['per_family']} examples; held-out "
            f"scenes: {self.raw['eval']['manifest']['num_examples']} examples"
        )
        if self.actions:
            self.raw["demos"] = ensure_demos(
                self.env_kwargs, self.dir, self.num_episodes, self.seed, self.noise_std
            )
        self.prepare_seconds = time.perf_counter() - start

    def setup(self, stage: str | None = None) -> None:
        """Tensors in the trained policy's vocabulary and action bins."""
        if self.train_c is not None:
            return
        self.prepare_data()  # loads what another process (or an earlier run) wrote
        policy = self.trainer.lightning_module.policy
        tok = policy.tokenizer
        self.train_c, self.eval_c, self.val_c = (
            CorpusTensors(self.raw[k], tok) for k in ("corpus", "eval", "val")
        )
        if self.actions:
            raw = self.raw["demos"]
            self.first_val = int(raw.episode_start[raw.num_episodes - self.val_episodes])
            self.train_action = torch.from_numpy(np.array(raw.action[: self.first_val]))
            self.train_state = torch.from_numpy(np.array(raw.state[: self.first_val]))
            policy.action_bins.fit(self.train_action)
            self.demos = DemoTensors(raw, tok, policy.action_bins, self.chunk_size)

    def statistics(self) -> dict[str, torch.Tensor] | None:
        """The normaliser's statistics from the training episodes (None in stage 1)."""
        if self.demos is None:
            return None
        return dict(
            state_mean=self.train_state.mean(0), state_std=self.train_state.std(0),
            action_low=self.train_action.min(0).values, action_high=self.train_action.max(0).values,
        )  # fmt: skip

    def train_dataloader(self) -> MixedBatches:
        use_corpus = not self.actions or self.cotrain_ratio > 0
        demo_idx = torch.arange(self.first_val) if self.actions else None
        return MixedBatches(
            self.train_c if use_corpus else None, torch.arange(len(self.train_c)), self.demos,
            demo_idx, self.batch_size, self.cotrain_ratio, self.steps_per_epoch,
            self.shuffle_seed,
        )  # fmt: skip

    def val_dataloader(self):
        val = fixed_batches(self.val_c, torch.arange(len(self.val_c)), 256)
        if self.actions:
            steps = torch.arange(self.first_val, len(self.demos))
            val += fixed_batches(self.demos, steps[:: max(1, len(steps) // 512)], 256)
        return val

    def evaluate(self, policy) -> dict:
        """metrics.json's `answers`: per-family accuracy on every held-out scene, on the
        examples that name one of the env's held-out pairs (what the control corpus never
        names), and how often keypoint 0 is on the shape asked about (`keypoint_on_shape`;
        with the relative eyes also keypoint 1 on the shape a relation or spatial question is
        measured from, `anchor_on_shape`); `corpus`: what the training corpus held."""
        from vla.vlm.scoring import score_answers, score_grounding

        families, hits, eyes_families, eyes_hits = [], [], [], []
        anchor_families, anchor_hits = [], []
        for batch in fixed_batches(self.eval_c, torch.arange(len(self.eval_c)), 256):
            f, h, eyes = score_answers(policy, batch, with_eyes=True)
            families, hits = families + f, hits + h
            f, h = score_grounding(policy, batch, eyes=eyes)  # the eyes the answers came from
            eyes_families, eyes_hits = eyes_families + f, eyes_hits + h
            if policy.vision.relative:
                f, h = score_grounding(policy, batch, anchor=True, eyes=eyes)
                anchor_families, anchor_hits = anchor_families + f, anchor_hits + h
        names = {" ".join(PAIRS[p]) for p in self.env_kwargs.get("held_out_pairs") or ()}
        questions = policy.tokenizer.decode(self.eval_c.tokens)
        held = [
            any(n in q or n in a for n in names)
            for q, a in zip(questions, self.eval_c.answers, strict=True)
        ]
        pick = lambda xs: [x for x, k in zip(xs, held, strict=True) if k]  # noqa: E731
        on_shape = per_family(eyes_families, eyes_hits) if eyes_families else {}
        on_anchor = per_family(anchor_families, anchor_hits) if anchor_families else {}
        answers = dict(
            all=per_family(families, hits),
            held_out_pairs=per_family(pick(families), pick(hits)),
            keypoint_on_shape=on_shape,
        )
        if on_anchor:
            answers["anchor_on_shape"] = on_anchor
        for f, v in answers["all"].items():
            line = f"answers on held-out scenes, {f:<10} {v['accuracy']:.1%} of {v.get('n', '')}"
            if f in on_shape and f != "mean":
                line += f"; keypoint 0 on the shape {on_shape[f]['accuracy']:.1%}"
            if f in on_anchor and f != "mean":
                line += f"; keypoint 1 on the anchor {on_anchor[f]['accuracy']:.1%}"
            log.info(line)
        corpus = self.raw["corpus"]["manifest"] | {"path": str(self.dir)}
        return dict(
            answers=answers,
            corpus=corpus,
            eval_corpus=asdict(self.eval_cfg),
            val_corpus=asdict(self.val_cfg),
        )
