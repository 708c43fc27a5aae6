"""The training-only keypoint losses: keypoint 0 onto the shape a question is about, keypoint 1
onto the second shape a spatial question names."""

import pytest
import torch

import vla.vlm.data as d
from tests.vlm.builders import small_policy
from vla.errors import ConfigError
from vla.vlm.corpus import CorpusConfig, ensure_corpus
from vla.vlm.module import VLMModule
from vla.vlm.questions import FAMILIES


def test_the_second_keypoint_loss_is_the_mean_squared_distance_on_spatial_questions(tmp_path):
    policy = small_policy()
    corpus = d.CorpusTensors(
        ensure_corpus(tmp_path, CorpusConfig(num_scenes=6, seed=1)), policy.tokenizer
    )
    batch = corpus.batch(torch.arange(len(corpus)))
    spatial = batch[d.FAMILY] == FAMILIES.index("spatial")
    assert (batch[d.HAS_OTHER] == spatial).all() and spatial.sum() >= 3
    with torch.no_grad():
        _, _, out = policy.prefix(
            batch[d.IMAGE], batch[d.STATE], batch[d.TOKENS], batch[d.HAS_STATE]
        )
        xy = out["keypoints_xy"][spatial, 1]  # [n,2] image coordinates
        want = (xy - (2 * batch[d.OTHER][spatial] - 1)).square().sum(-1).mean()
        plain, plain_logs = VLMModule(policy, torch.optim.AdamW).model_step(batch)
        loss, logs = VLMModule(policy, torch.optim.AdamW, second_keypoint_weight=2.0).model_step(
            batch
        )
    assert "second_keypoint_mse" not in plain_logs and "keypoint_mse" not in logs
    assert torch.allclose(logs["second_keypoint_mse"], want)
    assert torch.allclose(loss, plain + 2.0 * want)


def test_a_negative_keypoint_weight_is_refused():
    with pytest.raises(ConfigError, match="bc.second_keypoint_weight=-1 must be >= 0"):
        VLMModule(small_policy(), torch.optim.AdamW, second_keypoint_weight=-1)
