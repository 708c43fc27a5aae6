"""vla: a small vision-language-action policy training pipeline."""

import vla.envs  # noqa: F401  (registers vla/Reach-v0)

__version__ = "0.1.0"
