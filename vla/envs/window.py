"""The window of `render_mode="human"`: each frame the env renders for people, shown as it
comes and paced to the env's `render_fps`, as Gymnasium's own `HumanRendering` wrapper shows
an rgb_array env (same library, same calls), so `gym.make("vla/Reach-v0", render_mode="human")`
plays an episode at watching speed.

pygame is imported only when the first frame is shown: the env, and every other render mode,
work without it. On Linux with no screen (no DISPLAY or WAYLAND_DISPLAY: a server, CI) the
window is drawn into memory by SDL's dummy driver, with a warning, so a script or
`check_env` that asks for "human" still runs there.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from gymnasium import logger
from gymnasium.error import DependencyNotInstalled


class Window:
    """Shows uint8 [H,W,3] frames in one pygame window, at most `fps` per second."""

    def __init__(self, fps: float):
        self.fps = fps
        self.frames_shown = 0
        self._screen = None
        self._clock = None

    def show(self, frame: np.ndarray) -> None:
        """Draws `frame` and waits out the rest of its 1/fps seconds; returns None, what
        `render()` returns in human mode."""
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # its banner on import
        try:
            import pygame
        except ImportError as e:
            raise DependencyNotInstalled(
                'render_mode="human" needs pygame: pip install pygame (or -e ".[play]")'
            ) from e
        columns = np.transpose(frame, (1, 0, 2))  # [H,W,3] -> [W,H,3], pygame's x-major order
        if self._screen is None:
            off_screen_without_display()
            pygame.display.init()
            pygame.display.set_caption("vla/Reach-v0")
            self._screen = pygame.display.set_mode(columns.shape[:2])
            self._clock = pygame.time.Clock()
        self._screen.blit(pygame.surfarray.make_surface(columns), (0, 0))
        pygame.event.pump()  # keeps the window responsive (and the OS from calling it hung)
        self._clock.tick(self.fps)
        pygame.display.flip()
        self.frames_shown += 1

    def pixels(self) -> np.ndarray | None:
        """uint8 [H,W,3]: what the window shows now (None before the first frame)."""
        if self._screen is None:
            return None
        import pygame

        return np.transpose(pygame.surfarray.array3d(self._screen), (1, 0, 2))

    def close(self) -> None:
        """Closes the window; closing again, or a window never opened, does nothing."""
        if self._screen is not None:
            import pygame

            pygame.display.quit()
            self._screen = self._clock = None


def off_screen_without_display() -> None:
    """Chooses SDL's dummy video driver where Linux has no screen to open a window on (SDL
    would fail with "No available video device"), unless a driver was chosen already."""
    screen = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if sys.platform.startswith("linux") and not screen and "SDL_VIDEODRIVER" not in os.environ:
        os.environ["SDL_VIDEODRIVER"] = "dummy"
        logger.warn('render_mode="human" without a screen: the window is drawn off-screen')
