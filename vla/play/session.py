"""What the playground's page does, as plain Python: draw a scene, read an instruction's words,
run an episode step by step at watching speed, and show any step again. `vla.play.page` wires
these to gradio components; the tests call them directly."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from vla.envs.grammar import split_words
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.models.policy import VLAPolicy
from vla.play.episode import Scene, Step, play, unknown_words
from vla.play.pictures import chunk_markdown, query_figure, status_markdown, step_picture

FIGURE_EVERY_S = 1.0  # seconds between attention figures while an episode plays


@dataclass
class View:
    """What the page shows for one step."""

    picture: np.ndarray  # uint8 [S,2S+GAP,3]: the frame and its heat, with the chunk's path
    figure: np.ndarray | None  # the attention figure; None: the page keeps the one it shows
    chunk: str  # markdown
    status: str  # markdown
    step: Step
    unknown: list[str]  # the instruction's words the tokenizer did not know


class Playground:
    """One policy and its training env, shared by every visitor of the page.

    Args:
        policy: the policy (eval mode).
        trained_env: the ReachEnv keyword arguments it was trained on (`load_policy`).
        fps: steps shown per second while an episode plays (0: as fast as they are computed);
            the env's own render_fps is 10.
    """

    def __init__(self, policy: VLAPolicy, trained_env: dict, fps: float = 20.0):
        if fps < 0:
            raise ConfigError(f"play.fps={fps} must be >= 0 (0: no pacing)")
        self.policy, self.trained_env, self.fps = policy, dict(trained_env), float(fps)
        self.max_step = float(ReachEnv(**self.trained_env).max_step)

    def scene_env(self, scene: Scene) -> ReachEnv:
        """The env of `scene`; a combination it cannot draw is refused (ConfigError)."""
        return ReachEnv(**scene.env_kwargs(self.trained_env))

    def preview(self, scene: Scene) -> tuple[np.ndarray, str]:
        """The scene's first frame and its own drawn instruction (nothing run yet)."""
        env = self.scene_env(scene)
        obs, _ = env.reset(seed=int(scene.seed))
        return env.render(), obs["instruction"]

    def words(self, instruction: str) -> list[tuple[str, str | None]]:
        """The instruction's words as the tokenizer reads them (lowercase, no punctuation),
        for gradio's HighlightedText: each labelled "unknown" where the tokenizer has no id
        for it (the policy reads <unk>), "dropped" past its max_len, else None; spaces
        between them."""
        known, max_len = self.policy.tokenizer.word_to_id, self.policy.tokenizer.max_len
        segments = []
        for i, w in enumerate(split_words(instruction)):
            label = "dropped" if i >= max_len else None if w in known else "unknown"
            segments += [(w, label), (" ", None)]
        return segments[:-1]

    def run(self, scene: Scene, instruction: str, ablate: Sequence[str] = ()) -> Iterator[View]:
        """Plays one episode: a View per step as it happens, paced to `fps`."""
        unknown = unknown_words(self.policy, instruction)
        drawn_at = -np.inf  # when the attention figure was last drawn
        for step in play(self.policy, self.trained_env, scene, instruction, ablate):
            started = time.perf_counter()
            # the figure costs ~10x a step to draw and send: refreshed once a second, and last
            figure = step.done or step.t == 0 or started - drawn_at >= FIGURE_EVERY_S
            drawn_at = started if figure else drawn_at
            yield self.view(step, unknown, tuple(ablate), figure)
            if self.fps > 0 and not step.done:
                time.sleep(max(0.0, 1.0 / self.fps - (time.perf_counter() - started)))

    def view(
        self,
        step: Step,
        unknown: list[str],
        ablate: tuple[str, ...] = (),
        with_figure: bool = True,
    ) -> View:
        """The View of one step (again, when the page's slider picks it)."""
        figure = query_figure(step) if with_figure else None
        return View(
            picture=step_picture(step, self.max_step),
            figure=figure,
            chunk=chunk_markdown(step),
            status=status_markdown(step, unknown, ablate),
            step=step,
            unknown=unknown,
        )
