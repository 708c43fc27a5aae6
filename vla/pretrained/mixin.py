"""What `VLAPolicy` offers a user who was handed a trained policy (lerobot's policy API):

    policy = VLAPolicy.from_pretrained("outputs/train/<run>/pretrained_model")  # or a Hub id
    policy.reset()                         # start of an episode
    action = policy.select_action(obs)     # one env observation -> one action [A]

`select_action` executes chunks as every rollout does (`vla.eval.runner.PolicyRunner`:
`n_action_steps` actions of each chunk, then a new query), so a loop of it in one env takes the
same actions as the evaluation that measured the policy. The folder itself (config.json,
model.safetensors, README.md) is `vla.pretrained`'s; those modules import the policy, so they
are imported here only when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from vla import keys

# `vla/LeRobotReach-v0` gives lerobot's names (`vla.lerobot.env`), and lerobot calls the
# instruction the task
LEROBOT_KEYS = {"pixels": keys.IMAGE, "agent_pos": keys.STATE, "task": keys.INSTRUCTION}
OBS_KEYS = (keys.IMAGE, keys.STATE, keys.INSTRUCTION)


class PretrainedMixin:
    """from_pretrained / save_pretrained / push_to_hub, and reset / select_action /
    inference: what a rollout or a user needs beyond the network's forward pass."""

    policy_config: dict | None = None  # the resolved config that rebuilds it (when known)
    env_config: dict | None = None  # the ReachEnv arguments it was trained on (None: no env)
    model_card: str | None = None  # the README.md it was loaded with
    _action_runner = None  # select_action's PolicyRunner; None: a new episode

    @classmethod
    def from_pretrained(cls, name_or_path, device="cpu", revision: str | None = None):
        """The policy of a pretrained folder, or of a Hub id of one (`huggingface_hub`, the
        `hub` extra), in eval mode on `device`. Reads only data: a folder with a pickled file,
        a config naming code outside `vla.`, tensors that do not fit or another format
        version is refused with a CheckpointError naming the file and the problem."""
        from vla.pretrained.folder import read_pretrained

        policy = read_pretrained(name_or_path, device=device, revision=revision)
        if not isinstance(policy, cls):
            raise TypeError(f"{name_or_path} holds a {type(policy).__name__}, not a {cls.__name__}")
        return policy

    def save_pretrained(
        self,
        folder,
        policy_config: dict | None = None,
        env_config: dict | None = None,
        card: str | None = None,
    ) -> Path:
        """Writes config.json, model.safetensors and README.md into `folder` (replaced whole).

        Args:
            folder: where to write.
            policy_config: the resolved config the policy was built from (None: the one it
                was loaded with; a policy built by hand must be given its config).
            env_config: the env it was trained on (None: the one it was loaded with).
            card: the model card's text (None: the one it was loaded with, else a card
                from the config alone).
        """
        from vla.pretrained.card import model_card
        from vla.pretrained.folder import folder_config, write_pretrained

        config = policy_config if policy_config is not None else self.policy_config
        if config is None:
            raise ValueError(
                "save_pretrained needs policy_config: this policy was not loaded from a "
                "checkpoint or folder, so it does not know the config it was built from"
            )
        env = env_config if env_config is not None else self.env_config
        if card is None:
            card = self.model_card
        if card is None:
            vocabulary = self.tokenizer.get_extra_state()
            card = model_card(folder_config(self, config, env, vocabulary), {})
        return write_pretrained(self, folder, config, env, card)

    def push_to_hub(self, repo_id: str, private: bool = False, token: str | None = None) -> str:
        """Publishes the policy's pretrained folder as the Hub model `repo_id` (needs
        `huggingface_hub` and a login: `hf auth login`); returns the repository's URL."""
        import tempfile

        from vla.pretrained.hub import push_folder

        with tempfile.TemporaryDirectory() as tmp:
            folder = self.save_pretrained(Path(tmp) / "pretrained_model")
            return push_folder(folder, repo_id, private=private, token=token)

    def reset(self) -> None:
        """Start of an episode: nothing queued for `select_action`, and a sampling head
        restarts its noise stream, so the same episode draws the same noise every time."""
        self.head.reset()
        self._action_runner = None

    def select_action(self, obs: Mapping, instruction: str | None = None) -> np.ndarray:
        """The action to execute now, for one env's observation.

        Args:
            obs: {"image": uint8 [H,W,3], "state": [S], "instruction": str}, as
                `vla/Reach-v0` gives it, or {"pixels", "agent_pos"} as `vla/LeRobotReach-v0`
                does (the instruction then comes as `instruction`, or as obs["task"]).
            instruction: the episode's instruction, where `obs` has none.

        Returns:
            float32 [A] in env units: the next action of the current chunk, a new chunk being
            predicted when the last one's `n_action_steps` actions are spent.
        """
        from vla.eval.runner import PolicyRunner

        if self._action_runner is None:
            self._action_runner = PolicyRunner(self)
        return self._action_runner.act(env_observation(obs, instruction))

    def set_normalization(self, state_mean, state_std, action_low, action_high) -> None:
        """Store the training set's statistics (array-likes of length S, S, A, A)."""
        self.normalizer.set_stats(state_mean, state_std, action_low, action_high)

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


def env_observation(obs: Mapping, instruction: str | None = None) -> dict:
    """`obs` with our keys (image, state, instruction), whichever env's names it came with."""
    out = {LEROBOT_KEYS.get(k, k): v for k, v in obs.items()}
    if instruction is not None:
        out[keys.INSTRUCTION] = instruction
    missing = [k for k in OBS_KEYS if k not in out]
    if missing:
        raise ValueError(
            f"observation has no {missing} (got keys: {sorted(obs)}); for vla/LeRobotReach-v0 "
            "pass the instruction: select_action(obs, instruction=env.get_wrapper_attr('task'))"
        )
    return {k: out[k] for k in OBS_KEYS}
