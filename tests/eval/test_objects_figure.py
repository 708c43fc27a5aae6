"""Pictures of the object slots: a slot's map is drawn where it peaks, the pointer's pick is
outlined, and visualize.py writes one per observation for a policy with object tokens."""

import numpy as np
from PIL import Image

from tests.conftest import _untrained_checkpoint
from vla.eval.objects_figure import CAPTION_H, TITLE_H, objects_figure
from vla.eval.visualize import visualize


def test_each_slot_panel_is_hot_where_its_map_peaks_and_the_pick_is_outlined():
    S, K = 64, 3
    frame = np.zeros((S, S, 3), np.uint8)
    where = np.zeros((K, 8, 8))
    for k, (r, c) in enumerate([(1, 1), (6, 2), (3, 6)]):
        where[k, r, c] = 1.0  # each slot's whole map on one cell
    xy = np.full((K, 2), 0.9)  # crosses in the corner, away from the hot cells
    probs = np.array([0.1, 0.7, 0.2])
    picture = objects_figure(frame, where, xy, probs, "go to the red circle")
    assert picture.shape[0] == TITLE_H + S + CAPTION_H
    for k, (r, c) in enumerate([(1, 1), (6, 2), (3, 6)]):
        panel = picture[TITLE_H : TITLE_H + S, k * S : (k + 1) * S].astype(int)
        hot = panel[r * 8 + 4, c * 8 + 4]  # the middle of the peaked cell
        cold = panel[((r + 4) % 8) * 8 + 4, ((c + 4) % 8) * 8 + 4]
        assert hot[0] > 150 and cold.sum() < 60, (k, hot, cold)
        green_border = (panel[1, S // 2] == [0, 255, 0]).all()
        assert green_border == (k == 1)  # only the pointer's pick is outlined


def test_visualize_draws_the_slots_of_an_object_policy(tmp_path, compose_cfg):
    ckpt = _untrained_checkpoint(tmp_path, ["model/objects=slots"])
    cfg = compose_cfg(
        "visualize",
        [
            f"ckpt_path={ckpt}",
            "viz.num_episodes=1",
            "viz.steps=[0]",
            f"paths.output_dir={tmp_path}",
        ],
    )
    paths = sorted(p.name for p in visualize(cfg))
    assert paths == ["attention_ep00_t00.png", "objects_ep00_t00.png"]
    picture = np.asarray(Image.open(tmp_path / "objects_ep00_t00.png"))
    assert picture.shape[1] == 6 * 256 + 64  # six slots of the 256 px frame, then the scale
