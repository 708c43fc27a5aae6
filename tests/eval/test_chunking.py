import math

import numpy as np
import pytest

from vla.eval.chunking import ActionQueue, TemporalEnsembler, make_executor


def chunk(query: int, env: int, K: int = 4) -> np.ndarray:
    """A recognisable chunk [K,1]: action j of query q for env e is 100 e + 10 q + j."""
    return (100 * env + 10 * query + np.arange(K, dtype=np.float32))[:, None]


def test_queue_executes_n_actions_per_chunk_and_restarts_on_reset():
    q = ActionQueue(num_envs=2, chunk_size=4, action_dim=1, n_action_steps=3)
    both = np.array([0, 1])
    executed = []
    for t in range(5):
        ask = np.flatnonzero(q.needs_query())
        if len(ask):
            q.add(ask, np.stack([chunk(t, e) for e in ask]))
        executed.append(q.act(both)[:, 0].tolist())
        if t == 1:  # env 1's episode ends mid-chunk: its next step needs a fresh chunk
            assert q.queries.tolist() == [1, 1]
            q.reset(np.array([False, True]))
            assert q.queries.tolist() == [1, 0]
    # env 0: queries at t=0 and t=3 (3 actions each); env 1: t=0, then after its reset t=2
    assert executed == [[0, 100], [1, 101], [2, 120], [30, 121], [31, 122]]
    assert q.queries.tolist() == [2, 1]


def test_queue_refuses_to_act_without_a_chunk():
    q = ActionQueue(num_envs=1, chunk_size=2, action_dim=1, n_action_steps=1)
    with pytest.raises(ValueError, match="no queued action"):
        q.act(np.array([0]))
    with pytest.raises(ValueError, match="n_action_steps=3 must be between 1 and chunk_size=2"):
        ActionQueue(1, 2, 1, n_action_steps=3)


def test_temporal_ensemble_weights_oldest_first():
    """K=3, m=0.5: at step 2 three chunks cover the step: query 0 (its action 2), query 1 (its
    action 1), query 2 (its action 0), weighted 1, e^-0.5, e^-1 in that order."""
    m = 0.5
    ens = TemporalEnsembler(num_envs=1, chunk_size=3, action_dim=1, coeff=m)
    env = np.array([0])
    out = []
    for t in range(4):
        ens.add(env, chunk(t, 0, K=3)[None])
        out.append(ens.act(env)[0, 0])
    w1, w2 = math.exp(-m), math.exp(-2 * m)
    expected = [
        0.0,  # only query 0 covers step 0
        (1 + w1 * 10) / (1 + w1),
        (2 + w1 * 11 + w2 * 20) / (1 + w1 + w2),
        (12 + w1 * 21 + w2 * 30) / (1 + w1 + w2),  # query 0 no longer covers step 3
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert ens.queries.tolist() == [4]


def test_temporal_ensemble_is_per_env_and_resets():
    ens = make_executor(2, 2, 1, n_action_steps=1, temporal_ensemble_coeff=0.0)  # plain mean
    both = np.array([0, 1])
    ens.add(both, np.stack([chunk(0, 0, K=2), chunk(0, 1, K=2)]))
    np.testing.assert_allclose(ens.act(both)[:, 0], [0, 100])
    ens.reset(np.array([True, False]))  # env 0 starts a new episode: query 0 is forgotten
    ens.add(both, np.stack([chunk(1, 0, K=2), chunk(1, 1, K=2)]))
    np.testing.assert_allclose(ens.act(both)[:, 0], [10, (101 + 110) / 2])
    assert ens.queries.tolist() == [1, 2]
    with pytest.raises(ValueError, match="must be a finite number"):
        TemporalEnsembler(1, 2, 1, coeff=float("nan"))
