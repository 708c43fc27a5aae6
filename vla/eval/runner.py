"""PolicyRunner: the one way to run a policy, in one env or in a vector of them.

    obs (as the env gives it: one, or a batch of num_envs)
      ─ prepare_observation ─> image [B,H,W,3], state [B,S], tokens [B,L]
      ─ the envs whose chunk ran out ─ policy.predict_chunk_tensors ─> chunks [n,K,A]
      ─ executor: ActionQueue (N actions per chunk) | TemporalEnsembler (ACT's blend)
      ─> one action per env [B,A] (or [A] for one unbatched observation)

The policy stays stateless (observations in, a chunk out); everything that remembers an
episode lives in the executor, per env. So a single-env user, a rollout of 50 envs, the
attention pictures and the benchmark's latency all run chunks the same way, and per-env
resets, `n_action_steps` overrides and temporal ensembling work for every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from vla.eval.chunking import check_chunking, make_executor
from vla.eval.observation import prepare_observation
from vla.models.policy import VLAPolicy


class PolicyRunner:
    """Runs a policy in `num_envs` envs stepped together: `reset()` at the start of the
    episodes, then `act(obs)` every step.

    Args:
        policy: the policy; it is queried in eval mode, without autograd.
        num_envs: envs stepped together (1: a single env, whose observation may come unbatched).
        n_action_steps: actions of each chunk executed before the next query (None: the
            policy's own `n_action_steps`).
        temporal_ensemble_coeff: m: query every step and execute the blend of the chunks that
            cover it, weighted exp(-m * i), oldest first (ACT); None: execute chunks as queued.
        transform: (image, state, tokens) -> (image, state, tokens), applied before every
            query (the rollouts' modality ablations).
    """

    def __init__(
        self,
        policy: VLAPolicy,
        num_envs: int = 1,
        n_action_steps: int | None = None,
        temporal_ensemble_coeff: float | None = None,
        transform: Callable | None = None,
    ):
        self.policy, self.num_envs, self.transform = policy, num_envs, transform
        self.n_action_steps = check_chunking(policy, n_action_steps, temporal_ensemble_coeff)
        self.executor = make_executor(
            num_envs, policy.chunk_size, policy.action_dim, self.n_action_steps,
            temporal_ensemble_coeff,
        )  # fmt: skip

    @property
    def queries(self) -> np.ndarray:
        """int [num_envs]: chunks each env's episode has used since its reset."""
        return self.executor.queries

    def needs_query(self) -> np.ndarray:
        """bool [num_envs]: envs whose next action comes from a new query on their
        observation."""
        return self.executor.needs_query()

    def reset(self, mask: np.ndarray | None = None) -> None:
        """New episodes: in every env (None), which also restarts a sampling head's noise so
        the same episodes draw the same noise, or only where `mask` [num_envs] is True (an
        episode of a vector env that ended while the others go on)."""
        if mask is None:
            self.policy.reset()
            mask = np.ones(self.num_envs, dtype=bool)
        self.executor.reset(np.asarray(mask, dtype=bool))

    def act(self, obs: Mapping, active: np.ndarray | None = None) -> np.ndarray:
        """The action each env executes now.

        Args:
            obs: {"image": uint8 [H,W,3] | [num_envs,H,W,3], "state": [S] | [num_envs,S],
                  "instruction": str | num_envs strings} (numpy or torch), as the env or the
                  vector env gives it.
            active: indices of the envs that step now (None: all); the others are neither
                queried nor moved on, and get zero actions (a finished episode stands still).

        Returns:
            float32 actions in env units: [A] for an unbatched observation, else [num_envs,A].
        """
        device = next(self.policy.parameters()).device
        image, state, tokens, batched = prepare_observation(obs, self.policy.tokenizer, device)
        if len(image) != self.num_envs:
            raise ValueError(f"{len(image)} observations for a runner of {self.num_envs} envs")
        envs = np.arange(self.num_envs) if active is None else np.asarray(active, dtype=np.int64)
        ask = envs[self.needs_query()[envs]]  # envs whose chunk ran out
        if len(ask):
            rows = torch.from_numpy(ask).to(device)
            inputs = image[rows], state[rows], tokens[rows]  # [n,H,W,3], [n,S], [n,L]
            if self.transform is not None:
                inputs = self.transform(*inputs)
            chunks = self.policy.predict_chunk_tensors(*inputs)  # [n,K,A]
            self.executor.add(ask, chunks.float().cpu().numpy())
        action = np.zeros((self.num_envs, self.policy.action_dim), dtype=np.float32)
        action[envs] = self.executor.act(envs)  # [n,A]; every active env moves on one step
        return action if batched else action[0]
