"""Registers our task with lerobot as `--env.type=vla_reach` (lerobot >= 0.6 installed).

Importing this module needs lerobot; nothing else in `vla` imports it, and no test does (CI
cannot install lerobot beside torch 2.13). lerobot-eval imports installed distributions
named `lerobot_env_*` itself; ours is named `vla`, so import this module first:

    python -c "import vla.lerobot.plugin; from lerobot.scripts.lerobot_eval import main; main()" \
        --env.type=vla_reach --policy.path=<trained policy> --eval.n_episodes=50
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.configs.types import FeatureType, PolicyFeature  # both 0.4 and 0.6
from lerobot.envs.configs import EnvConfig

from vla.lerobot.env import AGENT_POS, ENV_ID, PIXELS


@EnvConfig.register_subclass("vla_reach")
@dataclass
class VLAReachEnv(EnvConfig):
    """`vla/LeRobotReach-v0` for lerobot: the env's own defaults unless set here."""

    task: str | None = "LeRobotReach-v0"
    fps: int = 10  # ReachEnv.metadata["render_fps"]
    image_size: int = 48
    num_targets: int = 3
    families: list[str] = field(default_factory=lambda: ["name"])
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(
        default_factory=lambda: {
            "action": "action",
            AGENT_POS: "observation.state",
            PIXELS: "observation.image",
        }
    )

    def __post_init__(self):
        self.features = {
            "action": PolicyFeature(type=FeatureType.ACTION, shape=(2,)),
            AGENT_POS: PolicyFeature(type=FeatureType.STATE, shape=(4,)),
            PIXELS: PolicyFeature(type=FeatureType.VISUAL, shape=(self.image_size,) * 2 + (3,)),
        }

    @property
    def package_name(self) -> str:
        return "vla.lerobot.env"  # importing it registers ENV_ID

    @property
    def gym_id(self) -> str:
        return ENV_ID

    @property
    def gym_kwargs(self) -> dict:
        return dict(
            image_size=self.image_size, num_targets=self.num_targets, families=self.families
        )
