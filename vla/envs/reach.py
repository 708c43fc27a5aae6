"""`vla/Reach-v0`: reach the shape(s) that the instruction names, in a top-down 2-D arena.

    +-----------------------+   observation
    |   ▲ green             |     image        uint8 [H,W,3]  shapes + effector
    |          ● red        |     state        float32 [4]    effector x, y, vx, vy
    |   o effector          |     instruction  "go to the shape left of the red circle"
    |              ■ blue   |   action: velocity in [-1,1]^2, times max_step per step
    +-----------------------+

Only the image shows where the shapes are, only the instruction says which one is wanted, and
the state says where the effector is: a policy needs all three. A `sequence` instruction names
several shapes to reach in order; each one reached is drawn dimmed from then on, which is how
the policy can see what is done (the state never says).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vla.envs import render, scene, window
from vla.envs.config import check_env_args
from vla.envs.families import Split
from vla.envs.grammar import HELD_OUT_PAIRS, HELD_OUT_RELATIONS, HELD_OUT_VERBS
from vla.keys import IMAGE, INSTRUCTION, STATE

STATE_DIM = 4
ACTION_DIM = 2
INSTRUCTION_CHARSET = string.ascii_lowercase + " "


class ReachEnv(gym.Env):
    """A language-conditioned reaching task.

    Args:
        num_targets: shapes in the arena, each a distinct (colour, shape) pair.
        image_size: side of the observation image in pixels.
        render_size: side of the frame returned by `render()` (for people, not the policy).
        max_step: displacement per step for an action of 1 on an axis (arena units).
        success_radius: a shape is reached when the effector is this close to its centre.
        target_size: width of a shape in arena units.
        min_separation: minimum distance between shape centres, and between the start and any.
        max_episode_steps: steps allowed per shape to reach; then the episode is truncated.
        shared_colours: if False, the shapes in a scene have distinct colours; if True, colours
            (and shapes) may repeat, so the instruction's colour and shape must be bound together.
        success_bonus: reward on success; the rest of the reward is progress towards the
            shape to reach now, in units of max_step.
        families: instruction families, drawn uniformly per episode (`vla.envs.families`).
        chain_length: shapes a `sequence` instruction names.
        split: which instructions: "train", or a held-out split (`vla.envs.families.SPLITS`).
        held_out_pairs, held_out_verbs, held_out_relations: what "train" never names and the
            held-out splits test (indices into PAIRS, phrasings, "relation:reference" keys).
        relation_words: the only relation words relation instructions use (None: every one,
            `grammar.RELATION_WORDS`); for evaluating one word, e.g. ["nearest"].
        background: RGB of the arena floor.
        pixel_noise: std of Gaussian noise added to every observed pixel (0-255 units).
        render_mode: None, "rgb_array" or "human" (a window at render_fps: `vla.envs.window`).
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 10}

    def __init__(
        self,
        num_targets: int = 3,
        image_size: int = 48,
        render_size: int = 256,
        max_step: float = 0.06,
        success_radius: float = 0.06,
        target_size: float = 0.14,
        min_separation: float = 0.2,
        max_episode_steps: int = 50,
        shared_colours: bool = False,
        success_bonus: float = 1.0,
        families: Sequence[str] = ("name",),
        chain_length: int = 2,
        split: str = "train",
        held_out_pairs: Sequence[int] = HELD_OUT_PAIRS,
        held_out_verbs: Sequence[str] = HELD_OUT_VERBS,
        held_out_relations: Sequence[str] = HELD_OUT_RELATIONS,
        relation_words: Sequence[str] | None = None,
        background: Sequence[int] = render.BACKGROUND,
        pixel_noise: float = 0.0,
        render_mode: str | None = None,
    ):
        check_env_args({k: v for k, v in locals().items() if k != "self"}, self.metadata)
        self.num_targets = num_targets
        self.image_size = image_size
        self.render_size = render_size
        self.max_step = float(max_step)
        self.success_radius = float(success_radius)
        self.target_size = float(target_size)
        self.min_separation = float(min_separation)
        self.max_episode_steps = max_episode_steps
        self.shared_colours = shared_colours
        self.success_bonus = float(success_bonus)
        self.families = tuple(families)
        self.split = Split(
            split,
            frozenset(int(p) for p in held_out_pairs),
            tuple(held_out_verbs),
            frozenset(held_out_relations),
            chain_length,
            None if relation_words is None else tuple(relation_words),
        )
        self.background = tuple(int(c) for c in background)
        self.pixel_noise = float(pixel_noise)
        self.render_mode = render_mode
        self._window = window.Window(self.metadata["render_fps"])  # opened by "human" only
        self._layout = scene.Layout(
            num_targets, shared_colours, scene.centre_margin(target_size), min_separation
        )
        self._effector_radius = 0.025

        self.action_space = spaces.Box(-1.0, 1.0, (ACTION_DIM,), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                IMAGE: spaces.Box(0, 255, (image_size, image_size, 3), dtype=np.uint8),
                # x, y in [0,1]; velocity = last displacement / max_step in [-1,1]
                STATE: spaces.Box(
                    np.array([0, 0, -1, -1], np.float32),
                    np.array([1, 1, 1, 1], np.float32),
                    dtype=np.float32,
                ),
                INSTRUCTION: spaces.Text(max_length=160, charset=INSTRUCTION_CHARSET),
            }
        )

    # ---- privileged state (for the scripted expert and tests, never the policy) ----
    @property
    def target_position(self) -> np.ndarray | None:
        """Centre of the shape to reach now (the last one once all are reached)."""
        return None if (now := self._now()) < 0 else self._centres[now]

    @property
    def object_centres(self) -> np.ndarray:
        """Centres of every shape in the scene [M,2], in the order they were drawn."""
        return self._centres

    @property
    def target_order(self) -> tuple[int, ...]:
        """Indices of the shapes to reach, in order (a sequence's chain; one shape otherwise)."""
        return tuple(self._targets)

    @property
    def object_pairs(self) -> np.ndarray:
        """Colour+shape of every shape in the scene [M] (indices into `grammar.PAIRS`)."""
        return np.asarray(self._pairs, dtype=np.int64)

    def _now(self) -> int:
        """Index of the shape to reach now (the last one once all are reached); -1: none."""
        return self._targets[min(self._stage, len(self._targets) - 1)] if self._targets else -1

    effector_position = property(lambda self: self._pos)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new scene and instruction; `options={"instruction": text}` draws scenes until what
        `text` names is there (text outside the grammar: nothing to reach, info["targets"] 0)."""
        super().reset(seed=seed)
        rng = self.np_random
        typed = (options or {}).get("instruction")
        if typed is None:
            family = self.families[int(rng.integers(len(self.families)))]
            drawn = scene.instructed_scene(rng, family, self.split, self._layout)
        else:
            drawn = scene.typed_scene(rng, str(typed), self._layout)
        self._pairs, self._centres, self._targets = drawn.pairs, drawn.centres, drawn.targets
        self._text, self._family, self._relation = drawn.text, drawn.family, drawn.relation
        self._pos = scene.sample_start(rng, self._centres, self.min_separation)
        self._vel = np.zeros(2, dtype=np.float32)
        self._elapsed, self._stage = 0, 0
        self._scene = self._draw(self.image_size)  # what stays put: drawn once per stage
        self._distance = self._target_distance()
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), self._get_info()

    def step(self, action):
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (ACTION_DIM,):
            raise ValueError(f"action must have shape ({ACTION_DIM},), got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action must be finite, got {action.tolist()}")
        action = np.clip(action, -1.0, 1.0)
        new_pos = np.clip(self._pos + action * self.max_step, 0.0, 1.0).astype(np.float32)
        # clipped: float rounding can put |displacement| / max_step a hair above 1
        self._vel = np.clip((new_pos - self._pos) / self.max_step, -1.0, 1.0)
        self._pos = new_pos
        self._elapsed += 1

        previous = self._distance
        self._distance = self._target_distance()
        reward = (previous - self._distance) / self.max_step
        if self._targets and self._distance <= self.success_radius:
            self._stage += 1  # reached: the next shape of the chain is the one to reach now
            if self._stage < len(self._targets):
                self._scene = self._draw(self.image_size)  # the reached shape now dimmed
                self._distance = self._target_distance()
        terminated = bool(self._targets) and self._stage == len(self._targets)
        reward += self.success_bonus if terminated else 0.0
        limit = self.max_episode_steps * max(len(self._targets), 1)
        truncated = not terminated and self._elapsed >= limit
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), float(reward), terminated, truncated, self._get_info()

    def render(self):
        if self.render_mode is None:
            return None
        frame = self._draw(self.render_size)
        # the success radius as a faint ring around the effector, for people watching
        render.draw_disc(frame, self._pos, self.success_radius, colour=(90, 90, 110))
        render.draw_disc(frame, self._pos, self._effector_radius)
        # noise like the policy's, from a generator of its own: watching must not change it
        frame = render.add_noise(frame, self.pixel_noise, np.random.default_rng(self._elapsed))
        return self._window.show(frame) if self.render_mode == "human" else frame

    def close(self):
        self._window.close()

    # ---- helpers ----
    def _draw(self, size: int) -> np.ndarray:
        """The shapes on the floor, those already reached dimmed."""
        reached = frozenset(self._targets[: self._stage])
        half = self.target_size / 2
        return render.draw_scene(size, self._pairs, self._centres, half, reached, self.background)

    def _get_obs(self) -> dict:
        image = self._scene.copy()
        render.draw_disc(image, self._pos, self._effector_radius)
        image = render.add_noise(image, self.pixel_noise, self.np_random)
        state = np.concatenate([self._pos, self._vel]).astype(np.float32)
        return {IMAGE: image, STATE: state, INSTRUCTION: self._text}

    def _get_info(self) -> dict:
        now = self._now()
        return {
            "family": self._family,
            "relation": self._relation,  # the relation word ("nearest", ...); None: no relation
            "targets": len(self._targets),
            "targets_reached": self._stage,
            "target_index": now,
            "target_pair": self._pairs[now] if now >= 0 else -1,
            "first_target_pair": self._pairs[self._targets[0]] if self._targets else -1,
            "distance": float(self._distance),
            "is_success": bool(self._targets) and self._stage == len(self._targets),
        }

    def _target_distance(self) -> float:
        target = self.target_position
        return 0.0 if target is None else float(np.linalg.norm(self._pos - target))
