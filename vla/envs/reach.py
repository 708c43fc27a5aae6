"""`vla/Reach-v0`: reach the shape that the instruction names, in a top-down 2-D arena.

    +-----------------------+   observation
    |   ▲ green               |     image        uint8 [H,W,3]  targets + effector
    |          ● red          |     state        float32 [4]    effector x, y, vx, vy
    |   o effector            |     instruction  "go to the red circle"
    |              ■ blue     |   action: velocity in [-1,1]^2, times max_step per step
    +-----------------------+

Only the image shows where the targets are, only the instruction says which one is wanted, and
the state says where the effector is: a policy needs all three.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vla.envs import render, scene
from vla.envs.instructions import COLOURS, PAIRS, sample_instruction
from vla.errors import ConfigError
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
        success_radius: the episode succeeds when the effector is this close to the named target.
        target_size: width of a shape in arena units.
        min_separation: minimum distance between target centres, and between the start and any
            target.
        max_episode_steps: the episode is truncated after this many steps.
        shared_colours: if False, the targets in a scene have distinct colours; if True, colours
            (and shapes) may repeat, so the instruction's colour and shape must be bound together.
        success_bonus: reward added on success; the rest of the reward is progress towards the
            named target in units of max_step.
        instructed_pairs: indices into `instructions.PAIRS` that may be named by an instruction
            (None: all). Other pairs can still appear as distractors. Used for held-out splits.
        render_mode: None or "rgb_array".
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        num_targets: int = 3,
        image_size: int = 64,
        render_size: int = 256,
        max_step: float = 0.06,
        success_radius: float = 0.06,
        target_size: float = 0.14,
        min_separation: float = 0.2,
        max_episode_steps: int = 50,
        shared_colours: bool = False,
        success_bonus: float = 1.0,
        instructed_pairs: Sequence[int] | None = None,
        render_mode: str | None = None,
    ):
        max_targets = len(PAIRS) if shared_colours else len(COLOURS)
        checks = [
            (num_targets >= 1, "num_targets", num_targets, ">= 1"),
            (
                num_targets <= max_targets,
                "num_targets",
                num_targets,
                f"<= {max_targets} (distinct colour+shape pairs available with "
                f"shared_colours={shared_colours})",
            ),
            (image_size >= 8, "image_size", image_size, ">= 8"),
            (render_size >= 8, "render_size", render_size, ">= 8"),
            (max_step > 0, "max_step", max_step, "> 0"),
            (success_radius > 0, "success_radius", success_radius, "> 0"),
            (0 < target_size < 0.5, "target_size", target_size, "in (0, 0.5)"),
            (min_separation >= 0, "min_separation", min_separation, ">= 0"),
            (max_episode_steps >= 1, "max_episode_steps", max_episode_steps, ">= 1"),
            (
                render_mode in (None, *self.metadata["render_modes"]),
                "render_mode",
                render_mode,
                f"one of {[None, *self.metadata['render_modes']]}",
            ),
        ]
        for ok, name, value, expected in checks:
            if not ok:
                raise ConfigError(f"env.{name}={value!r} is invalid: expected {expected}")
        # targets are placed inside [margin, 1 - margin]; make sure they can be spread out
        margin = target_size / 2 + 0.02
        usable = (1 - 2 * margin) ** 2
        if num_targets * np.pi * (min_separation / 2) ** 2 > 0.5 * usable:
            raise ConfigError(
                f"env.num_targets={num_targets} with env.min_separation={min_separation} does not "
                "fit in the arena: lower one of them"
            )
        if instructed_pairs is not None:
            instructed_pairs = sorted({int(p) for p in instructed_pairs})
            bad = [p for p in instructed_pairs if not 0 <= p < len(PAIRS)]
            if not instructed_pairs or bad:
                raise ConfigError(
                    f"env.instructed_pairs={instructed_pairs!r} is invalid: expected a non-empty "
                    f"list of indices in [0, {len(PAIRS)})"
                )

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
        self.instructed_pairs = instructed_pairs
        self.render_mode = render_mode
        self._margin = margin
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
                INSTRUCTION: spaces.Text(max_length=64, charset=INSTRUCTION_CHARSET),
            }
        )

    # ---- privileged state (for the scripted expert and tests, never the policy) ----
    @property
    def target_position(self) -> np.ndarray:
        return self._centres[self._target]

    @property
    def effector_position(self) -> np.ndarray:
        return self._pos

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        self._pairs = scene.sample_pairs(  # indices into PAIRS, one per target
            rng, self.num_targets, self.shared_colours, self.instructed_pairs
        )
        self._target = int(rng.integers(self.num_targets))
        if self.instructed_pairs is not None:
            allowed = [i for i, p in enumerate(self._pairs) if p in self.instructed_pairs]
            self._target = allowed[int(rng.integers(len(allowed)))]
        self._centres = scene.sample_centres(
            rng, self.num_targets, self._margin, self.min_separation
        )
        self._pos = scene.sample_start(rng, self._centres, self.min_separation)
        self._vel = np.zeros(2, dtype=np.float32)
        self._elapsed = 0
        colour, shape = PAIRS[self._pairs[self._target]]
        self._instruction = sample_instruction(rng, colour, shape)
        self._scene = render.draw_scene(
            self.image_size,
            [PAIRS[p][1] for p in self._pairs],
            [COLOURS[PAIRS[p][0]] for p in self._pairs],
            self._centres,
            self.target_size / 2,
        )
        self._distance = self._target_distance()
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
        terminated = self._distance <= self.success_radius
        truncated = not terminated and self._elapsed >= self.max_episode_steps
        reward = (previous - self._distance) / self.max_step
        if terminated:
            reward += self.success_bonus
        return self._get_obs(), float(reward), bool(terminated), bool(truncated), self._get_info()

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        frame = render.draw_scene(
            self.render_size,
            [PAIRS[p][1] for p in self._pairs],
            [COLOURS[PAIRS[p][0]] for p in self._pairs],
            self._centres,
            self.target_size / 2,
        )
        # the success radius as a faint ring around the effector, for people watching
        render.draw_disc(frame, self._pos, self.success_radius, colour=(90, 90, 110))
        render.draw_disc(frame, self._pos, self._effector_radius)
        return frame

    # ---- helpers ----
    def _get_obs(self) -> dict:
        image = self._scene.copy()
        render.draw_disc(image, self._pos, self._effector_radius)
        state = np.concatenate([self._pos, self._vel]).astype(np.float32)
        return {IMAGE: image, STATE: state, INSTRUCTION: self._instruction}

    def _get_info(self) -> dict:
        return {
            "target_index": self._target,
            "target_pair": self._pairs[self._target],
            "distance": float(self._distance),
            "is_success": bool(self._distance <= self.success_radius),
        }

    def _target_distance(self) -> float:
        return float(np.linalg.norm(self._pos - self._centres[self._target]))
