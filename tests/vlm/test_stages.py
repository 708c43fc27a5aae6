"""The chain measurement: which part of a chain a point is nearest, and one count per query
and per episode of the same episodes the playground plays."""

import numpy as np

from vla.checkpoint import load_policy
from vla.play.episode import Scene, play
from vla.vlm.stages import keypoint_stages, nearest_kind, report

CENTRES = np.array([[0.2, 0.2], [0.8, 0.2], [0.5, 0.8]])


def test_nearest_kind_names_the_part_of_the_chain():
    targets = (1, 0)  # reach shape 1, then shape 0; shape 2 is not in the chain
    assert nearest_kind([0.75, 0.25], CENTRES, targets, stage=0) == "now"
    assert nearest_kind([0.25, 0.2], CENTRES, targets, stage=0) == "later"
    assert nearest_kind([0.8, 0.3], CENTRES, targets, stage=1) == "reached"
    assert nearest_kind([0.2, 0.1], CENTRES, targets, stage=1) == "now"
    assert nearest_kind([0.5, 0.9], CENTRES, targets, stage=1) == "other"


def test_every_query_and_episode_is_counted_once(vlm_ckpt):
    policy, env = load_policy(vlm_ckpt)
    env, seeds = {**env, "max_episode_steps": 6}, [5, 6]  # an untrained policy: short episodes
    result = keypoint_stages(policy, env, seeds)
    steps = [list(play(policy, env, Scene(s, 3, False, "sequence"))) for s in seeds]
    queries = sum(1 for run in steps for st in run if not st.done and st.query.step == st.t)
    assert sum(sum(c.values()) for c in result["queries"].values()) == queries
    assert result["successes"] == sum(run[-1].success for run in steps)
    assert result["successes"] + sum(result["failures"].values()) == len(seeds)
    assert "of 2 sequence episodes" in report(result)
