"""PolicyRunner, the one way to run a policy: single or batched observations, chunks executed
N at a time or blended, per-env resets, and bad input refused."""

import numpy as np
import pytest
import torch

from tests.builders import build_policy, env_frames
from vla import keys
from vla.errors import ConfigError
from vla.eval.runner import PolicyRunner


@pytest.fixture(scope="module")
def frames():
    images, states, texts, _, _ = env_frames(n=6)
    return images, states, texts


def obs_of(frames, i):
    images, states, texts = frames
    return {keys.IMAGE: images[i], keys.STATE: states[i], keys.INSTRUCTION: texts[i]}


def chunks_of(policy, frames, rows) -> np.ndarray:
    """What the stateless inference API predicts for these frames: [n,K,A]."""
    images, states, texts = frames
    tokens = policy.tokenizer.encode([texts[i] for i in rows])
    image, state = torch.from_numpy(images[rows]), torch.from_numpy(states[rows])
    return policy.predict_chunk_tensors(image, state, tokens).numpy()


def test_one_env_and_a_batch_act_alike(frames):
    policy = build_policy("tiny")
    policy.train()
    one = PolicyRunner(policy).act(obs_of(frames, 0))
    assert one.shape == (2,) and one.dtype == np.float32 and np.abs(one).max() <= 1
    images, states, texts = frames
    batch = {keys.IMAGE: images[:3], keys.STATE: states[:3], keys.INSTRUCTION: texts[:3]}
    many = PolicyRunner(policy, num_envs=3).act(batch)
    assert many.shape == (3, 2) and many.dtype == np.float32
    np.testing.assert_allclose(many[0], one, atol=1e-5)
    np.testing.assert_allclose(many, chunks_of(policy, frames, [0, 1, 2])[:, 0], atol=1e-6)
    assert policy.training  # restored after inference
    as_torch = {k: torch.from_numpy(v) for k, v in batch.items() if k != keys.INSTRUCTION}
    as_torch[keys.INSTRUCTION] = tuple(texts[:3])
    np.testing.assert_allclose(PolicyRunner(policy, num_envs=3).act(as_torch), many, atol=1e-6)


def test_a_single_env_executes_n_actions_of_each_chunk_and_resets(frames):
    policy = build_policy("tiny", "model/head=continuous", "model.chunk_size=4", "model.n_action_steps=3")  # fmt: skip
    chunks = chunks_of(policy, frames, list(range(6)))  # [6,4,2]
    runner = PolicyRunner(policy)
    runner.reset()
    got = [runner.act(obs_of(frames, i)) for i in range(4)]  # queries on obs 0, then obs 3
    np.testing.assert_allclose(got, [chunks[0, 0], chunks[0, 1], chunks[0, 2], chunks[3, 0]], atol=1e-6)  # fmt: skip
    assert runner.queries.tolist() == [2]
    runner.reset()  # a new episode forgets the old chunk
    np.testing.assert_allclose(runner.act(obs_of(frames, 1)), chunks[1, 0], atol=1e-6)
    every = PolicyRunner(policy, n_action_steps=1)  # an override: a query every step
    got = [every.act(obs_of(frames, i)) for i in range(3)]
    np.testing.assert_allclose(got, chunks[:3, 0], atol=1e-6)
    assert every.queries.tolist() == [3]


def test_temporal_ensembling_works_for_a_single_env(frames):
    """m = 0: step 1 executes the plain mean of chunk 0's action 1 and chunk 1's action 0."""
    policy = build_policy("tiny", "model/head=continuous", "model.chunk_size=4", "model.n_action_steps=2")  # fmt: skip
    chunks = chunks_of(policy, frames, [0, 1, 2])
    runner = PolicyRunner(policy, temporal_ensemble_coeff=0.0)
    got = [runner.act(obs_of(frames, i)) for i in range(3)]
    expected = [
        chunks[0, 0],
        (chunks[0, 1] + chunks[1, 0]) / 2,
        (chunks[0, 2] + chunks[1, 1] + chunks[2, 0]) / 3,
    ]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert runner.queries.tolist() == [3]


def test_envs_reset_and_stand_still_on_their_own(frames):
    policy = build_policy("tiny", "model/head=continuous", "model.chunk_size=4", "model.n_action_steps=2")  # fmt: skip
    images, states, texts = frames
    chunks = chunks_of(policy, frames, list(range(6)))
    runner = PolicyRunner(policy, num_envs=2)

    def step(a, b, active=None):  # env 0 sees frame a, env 1 frame b
        obs = {
            keys.IMAGE: images[[a, b]],
            keys.STATE: states[[a, b]],
            keys.INSTRUCTION: [texts[a], texts[b]],
        }
        return runner.act(obs, active=active)

    np.testing.assert_allclose(step(0, 1), chunks[[0, 1], 0], atol=1e-6)
    runner.reset(np.array([False, True]))  # env 1's episode ended: it queries again
    np.testing.assert_allclose(step(2, 3), [chunks[0, 1], chunks[3, 0]], atol=1e-6)
    assert runner.queries.tolist() == [1, 1]
    # env 0's chunk has run out, but it is done: not queried, not moved on, standing still
    still = step(4, 5, active=np.array([1]))
    np.testing.assert_allclose(still, [[0.0, 0.0], chunks[3, 1]], atol=1e-6)
    assert runner.queries.tolist() == [1, 1]
    np.testing.assert_allclose(step(4, 5), chunks[[4, 5], 0], atol=1e-6)
    assert runner.queries.tolist() == [2, 2]


def test_a_sampling_head_repeats_its_noise_after_a_full_reset(frames):
    policy = build_policy("tiny", "model/head=flow", "model.chunk_size=2")
    runner = PolicyRunner(policy, n_action_steps=1)
    runner.reset()
    first = [runner.act(obs_of(frames, 0)) for _ in range(2)]
    assert not np.array_equal(first[0], first[1])  # the noise stream moves on
    runner.reset()
    np.testing.assert_array_equal(runner.act(obs_of(frames, 0)), first[0])


def test_bad_input_is_refused_and_unknown_words_are_one_word(frames):
    policy = build_policy("tiny", "model/head=continuous")  # unquantised, so words show
    runner = PolicyRunner(policy)
    image, state = np.zeros((32, 32, 3), np.uint8), np.full(4, 0.5, np.float32)
    bad_state = state.copy()
    bad_state[1] = np.nan
    with pytest.raises(ValueError, match="state contains NaN or inf"):
        runner.act({"image": image, "state": bad_state, "instruction": "reach"})
    bad_image = image.astype(np.float32)
    bad_image[0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="image contains NaN or inf"):
        runner.act({"image": bad_image, "state": state, "instruction": "reach"})
    with pytest.raises(ValueError, match="no 'instruction'"):
        runner.act({"image": image, "state": state})
    images, states, texts = frames
    with pytest.raises(ValueError, match="2 observations for a runner of 1 envs"):
        runner.act({"image": images[:2], "state": states[:2], "instruction": texts[:2]})

    def act(words):
        return runner.act({"image": image, "state": state, "instruction": words})

    # both unknown words become UNK, so the policy cannot tell them apart
    a, b = act("reach the purple circle"), act("reach the mauve circle")
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, act("reach the red circle"))


def test_settings_that_mean_nothing_are_the_users_error():
    single = build_policy("tiny")
    with pytest.raises(ConfigError, match=r"\(model.chunk_size=1\)"):
        PolicyRunner(single, temporal_ensemble_coeff=0.1)
    chunked = build_policy("tiny", "model.chunk_size=4")
    with pytest.raises(ConfigError, match="eval.n_action_steps=5 must be between 1 and model.chunk_size=4"):  # fmt: skip
        PolicyRunner(chunked, n_action_steps=5)
    with pytest.raises(ConfigError, match="must be a finite number"):
        PolicyRunner(chunked, temporal_ensemble_coeff=float("nan"))
