"""Turning predicted action chunks into one action per env step, for many envs at once.

A policy with chunk_size K predicts K actions per query. Two ways to execute them (ACT):

    ActionQueue         execute the first N = n_action_steps actions of a chunk, then query
                        again: a query every N steps.
    TemporalEnsembler   query every step and execute the weighted mean of every chunk so far
                        that covers this step, w_i = exp(-m * i) with i = 0 the oldest chunk
                        (ACT's temporal ensembling, lerobot's `ACTTemporalEnsembler`): m > 0
                        trusts older predictions more, m < 0 newer ones, m = 0 weighs all alike.

`check_chunking` refuses the settings that cannot mean anything, for training (before any data
is made) and evaluation (before any rollout) alike. Both keep their state per env, so in a vector env an episode that ends mid-chunk restarts
with an empty queue (`reset(mask)`) while the others carry on. Ensembling averages actions in
env units whatever the head: for the token heads it blends bin centres (the result may lie
between bins, as a finer action), for the flow head it blends independent samples, which can
pull two different modes towards their mean; for the continuous head it is ACT's smoothing.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from vla.errors import ConfigError


class ChunkExecutor(abc.ABC):
    """Shared bookkeeping: `num_envs` envs, chunks [K,A], queries counted since each reset."""

    def __init__(self, num_envs: int, chunk_size: int, action_dim: int):
        self.num_envs, self.chunk_size, self.action_dim = num_envs, chunk_size, action_dim
        self.queries = np.zeros(num_envs, dtype=np.int64)  # chunks received per env episode

    @abc.abstractmethod
    def needs_query(self) -> np.ndarray:
        """bool [num_envs]: envs that need a new chunk before their next action."""

    @abc.abstractmethod
    def add(self, envs: np.ndarray, chunks: np.ndarray) -> None:
        """New chunks [len(envs),K,A], predicted from these envs' current observations."""

    @abc.abstractmethod
    def act(self, envs: np.ndarray) -> np.ndarray:
        """The actions [len(envs),A] these envs execute now; each of them moves on one step."""

    @abc.abstractmethod
    def reset(self, mask: np.ndarray) -> None:
        """Envs where `mask` [num_envs] is True start a new episode: nothing queued."""

    def _received(self, envs: np.ndarray, chunks: np.ndarray) -> None:
        want = (len(envs), self.chunk_size, self.action_dim)
        if chunks.shape != want:
            raise ValueError(f"chunks have shape {chunks.shape}, expected {want}")
        self.queries[envs] += 1


class ActionQueue(ChunkExecutor):
    """Each env executes `n_action_steps` actions of its last chunk, then asks for another."""

    def __init__(self, num_envs: int, chunk_size: int, action_dim: int, n_action_steps: int):
        super().__init__(num_envs, chunk_size, action_dim)
        if not 1 <= n_action_steps <= chunk_size:
            raise ValueError(
                f"n_action_steps={n_action_steps} must be between 1 and chunk_size={chunk_size}"
            )
        self.n_action_steps = n_action_steps
        self.chunks = np.zeros((num_envs, chunk_size, action_dim), dtype=np.float32)
        self.next = np.zeros(num_envs, dtype=np.int64)  # index of the next action to execute
        self.left = np.zeros(num_envs, dtype=np.int64)  # actions left before the next query

    def needs_query(self) -> np.ndarray:
        return self.left == 0

    def add(self, envs: np.ndarray, chunks: np.ndarray) -> None:
        self._received(envs, chunks)
        self.chunks[envs] = chunks
        self.next[envs] = 0
        self.left[envs] = self.n_action_steps

    def act(self, envs: np.ndarray) -> np.ndarray:
        if (self.left[envs] == 0).any():
            raise ValueError(f"envs {envs[self.left[envs] == 0].tolist()} have no queued action")
        action = self.chunks[envs, self.next[envs]]  # [n,A]
        self.next[envs] += 1
        self.left[envs] -= 1
        return action

    def reset(self, mask: np.ndarray) -> None:
        self.left[mask] = 0
        self.queries[mask] = 0


class TemporalEnsembler(ChunkExecutor):
    """Every step, each env gets a new chunk and executes the weighted mean of all chunks
    covering that step. Slot j of an env's buffers is the step j steps from now; each holds
    the weighted sum of the chunks' actions for it, their total weight and how many there are
    (so the next chunk to cover it, the count-th, gets weight exp(-m * count))."""

    def __init__(self, num_envs: int, chunk_size: int, action_dim: int, coeff: float):
        super().__init__(num_envs, chunk_size, action_dim)
        if not math.isfinite(coeff):
            raise ValueError(f"temporal_ensemble_coeff={coeff} must be a finite number")
        self.coeff = coeff
        self.weighted = np.zeros((num_envs, chunk_size, action_dim))  # sum of w * action
        self.weight = np.zeros((num_envs, chunk_size))  # sum of w
        self.count = np.zeros((num_envs, chunk_size), dtype=np.int64)  # chunks covering slot

    def needs_query(self) -> np.ndarray:
        return np.ones(self.num_envs, dtype=bool)

    def add(self, envs: np.ndarray, chunks: np.ndarray) -> None:
        self._received(envs, chunks)
        w = np.exp(-self.coeff * self.count[envs])  # [n,K]: i = chunks already covering it
        self.weighted[envs] += w[..., None] * chunks
        self.weight[envs] += w
        self.count[envs] += 1

    def act(self, envs: np.ndarray) -> np.ndarray:
        if (self.count[envs, 0] == 0).any():
            raise ValueError(f"envs {envs[self.count[envs, 0] == 0].tolist()} have no chunk")
        action = self.weighted[envs, 0] / self.weight[envs, 0, None]  # [n,A]
        for buf in (self.weighted, self.weight, self.count):  # every slot moves one step closer
            buf[envs] = np.roll(buf[envs], -1, axis=1)
            buf[envs, -1] = 0
        return action.astype(np.float32)

    def reset(self, mask: np.ndarray) -> None:
        for buf in (self.weighted, self.weight, self.count, self.queries):
            buf[mask] = 0


def make_executor(
    num_envs: int,
    chunk_size: int,
    action_dim: int,
    n_action_steps: int,
    temporal_ensemble_coeff: float | None = None,
) -> ChunkExecutor:
    """An ActionQueue, or a TemporalEnsembler when `temporal_ensemble_coeff` is set."""
    if temporal_ensemble_coeff is None:
        return ActionQueue(num_envs, chunk_size, action_dim, n_action_steps)
    return TemporalEnsembler(num_envs, chunk_size, action_dim, temporal_ensemble_coeff)


def check_chunking(
    policy, n_action_steps: int | None, temporal_ensemble_coeff: float | None
) -> int:
    """The n_action_steps a runner executes; refuses settings that cannot mean anything."""
    K = policy.chunk_size
    if temporal_ensemble_coeff is not None:
        if K == 1:
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} blends overlapping "
                "chunks, but this policy predicts one action per query (model.chunk_size=1)"
            )
        if n_action_steps not in (None, 1):
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} queries the policy "
                f"every step, so eval.n_action_steps={n_action_steps} must be 1 or unset"
            )
        if not np.isfinite(temporal_ensemble_coeff):
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} must be a finite number"
            )
        return 1
    n = policy.n_action_steps if n_action_steps is None else n_action_steps
    if not 1 <= n <= K:
        raise ConfigError(f"eval.n_action_steps={n} must be between 1 and model.chunk_size={K}")
    return n
