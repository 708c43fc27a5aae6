"""One episode of the playground, step by step: a scene chosen by hand, an instruction typed
by hand, the policy run by `PolicyRunner` exactly as evaluation runs it, and at every step
what a person watching wants to see (the frame, the chunk in effect, the readout's attention
of the query that predicted it; a VLM's <bos> attention and keypoints).

    Scene(seed, num_targets, shared_colours, family) + instruction
      ─ ReachEnv.reset(seed, options={"instruction": typed}) ─> obs
      ─ PolicyRunner(policy behind a Recorder, transform=ablate_inputs) ─> action
          └─ each query: the inputs the policy saw (ablated) and its chunk [K,A]
      ─ query_attention(policy, inputs) ─> per layer [H,T_keys] (+ a VLM's keypoints [K,2])
      ─> Step(t, frame, chunk, attention, success) per step, as it happens

No gradio here: the page (`vla.play.page`) only draws these steps, and the tests compare them
with `vla.eval.rollout.rollout` on the same seed.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from vla.envs.grammar import split_words
from vla.envs.reach import ReachEnv
from vla.eval.attention import readout_attention
from vla.eval.rollout import ablate_inputs, check_ablations
from vla.eval.runner import PolicyRunner
from vla.models.policy import VLAPolicy
from vla.vlm.figure import bos_attention


@dataclass(frozen=True)
class Scene:
    """What the page's scene controls choose; the rest of the env is as the policy trained."""

    seed: int
    num_targets: int
    shared_colours: bool
    family: str

    def env_kwargs(self, trained: dict) -> dict:
        """ReachEnv keyword arguments: the checkpoint's env with this scene's choices."""
        return {
            **trained,
            "num_targets": int(self.num_targets),
            "shared_colours": bool(self.shared_colours),
            "families": [self.family],
            "render_mode": "rgb_array",
        }


@dataclass(frozen=True)
class Query:
    """One query of the policy: what it saw and what it answered."""

    step: int  # the env step it was made at
    frame: np.ndarray  # uint8 [S,S,3]: the rendered frame of that step
    chunk: np.ndarray  # [K,A] the predicted chunk, env units
    attention: list[tuple[str, np.ndarray]]  # the readout's weights: (layer, [H,T_keys])
    layout: dict[str, slice]  # where patches and words sit among the keys
    words: list[str]  # the instruction as the tokenizer read it (unknown: "<unk>")
    keypoints: np.ndarray | None = None  # a VLM's eyes: [K,2] arena units (no patch grid)


@dataclass
class Step:
    """The episode after `t` steps (t = 0: just reset), and the query whose chunk is in
    effect (at the end: the last one)."""

    t: int
    frame: np.ndarray  # uint8 [S,S,3]: the env's render() for people
    position: np.ndarray  # [2] effector, arena units
    query: Query
    instruction: str  # what the env instructs (the typed text, or the scene's own)
    limit: int  # steps the env allows this episode before truncating it
    info: dict
    done: bool = False
    success: bool = False


def unknown_words(policy: VLAPolicy, text: str) -> list[str]:
    """The instruction's words that the tokenizer has no id for (read as <unk>), and those
    past its max_len (dropped), in order, each once."""
    tokenizer = policy.tokenizer
    words = split_words(text)
    unknown = [w for w in words[: tokenizer.max_len] if w not in tokenizer.word_to_id]
    return list(dict.fromkeys(unknown + words[tokenizer.max_len :]))


def scene_options(env: ReachEnv, scene: Scene, instruction: str | None) -> dict | None:
    """The reset options of the episode: None (the scene's own drawn instruction, the episode
    evaluation runs for this seed) for no text or that same text, else {"instruction": typed},
    for which scenes are drawn from the seed until what it names is there."""
    typed = (instruction or "").strip()
    if not typed:
        return None
    drawn, _ = env.reset(seed=int(scene.seed))
    return None if typed == drawn["instruction"] else {"instruction": typed}


class Recorder:
    """The policy as PolicyRunner sees it, keeping the inputs and chunk of the last query, so
    the page shows the chunk that is executed (a sampling head draws new noise on every
    query: a second query would show another one)."""

    def __init__(self, policy: VLAPolicy):
        self.policy = policy
        self.inputs: tuple[torch.Tensor, ...] | None = None
        self.chunk: torch.Tensor | None = None

    def __getattr__(self, name):  # everything else is the policy's
        return getattr(self.policy, name)

    def predict_chunk_tensors(self, image, state, tokens):
        self.inputs = (image, state, tokens)
        self.chunk = self.policy.predict_chunk_tensors(image, state, tokens)  # [1,K,A]
        return self.chunk


def query_attention(policy, image, state, tokens):
    """A query's attention per layer [(name, [B,H,T_keys])], the layout of its keys, and a
    VLM's keypoints [B,K,2] (None for a readout: its picture is the patch grid). A VLM's
    query is the <bos> that starts the action tokens (`vla.vlm.figure`)."""
    if hasattr(policy, "bos_attention"):
        return bos_attention(policy, image, state, tokens)
    return (*readout_attention(policy, image, state, tokens), None)


def play(
    policy: VLAPolicy,
    trained_env: dict,
    scene: Scene,
    instruction: str | None = None,
    ablate: Sequence[str] = (),
) -> Iterator[Step]:
    """Runs one episode and yields a Step after the reset and after every env step; the last
    one has done=True and the episode's success.

    Args:
        trained_env: the checkpoint's env keyword arguments (`load_policy`).
        instruction: typed text (None or the scene's own: the scene's drawn instruction).
        ablate: inputs replaced by uninformative ones before every query ("language",
            "image", "state"; `vla.eval.rollout.ablate_inputs`).
    """
    ablate = check_ablations(ablate)
    env = ReachEnv(**scene.env_kwargs(trained_env))
    obs, info = env.reset(seed=int(scene.seed), options=scene_options(env, scene, instruction))
    recorder = Recorder(policy)
    transform = functools.partial(ablate_inputs, policy, ablate=ablate) if ablate else None
    runner = PolicyRunner(recorder, transform=transform)
    runner.reset()  # as rollout(): a sampling head restarts its noise, so replays repeat
    terminated = truncated = False
    query = None  # the first step always queries
    text, limit = obs["instruction"], env.max_episode_steps * max(info["targets"], 1)
    for t in itertools.count():  # every episode ends: the env truncates it
        frame, position = env.render(), env.effector_position.copy()
        if terminated or truncated:  # the end: the last query stays in view
            yield Step(t, frame, position, query, text, limit, info, done=True, success=terminated)
            return
        ask = runner.needs_query()[0]
        action = runner.act(obs)  # [A]; queries the policy when the chunk ran out
        if ask:  # the attention of that query, on the inputs the policy saw
            rows, layout, xy = query_attention(policy, *recorder.inputs)
            query = Query(
                step=t,
                frame=frame,
                chunk=recorder.chunk[0].float().cpu().numpy(),  # [K,A]
                attention=[(name, w[0].float().cpu().numpy()) for name, w in rows],
                layout=layout,
                words=policy.tokenizer.decode(recorder.inputs[2])[0].split(),
                keypoints=None if xy is None else xy[0].float().cpu().numpy(),
            )
        yield Step(t, frame, position, query, text, limit, info)
        obs, _, terminated, truncated, info = env.step(action)
