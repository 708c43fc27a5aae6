import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.builders import run_script_here
from vla.data.collect import collect
from vla.data.dataset import (
    ARRAYS,
    FORMAT_VERSION,
    DatasetError,
    dataset_key,
    dataset_path,
    load_demos,
    write_demos,
)
from vla.data.prepare import ensure_demos
from vla.data.seeds import SEED_LIMIT, SELECTION_SEED_START, TEST_SEED_START, check_seeds
from vla.envs.config import env_kwargs_of
from vla.errors import SeedRangeError

ENV = dict(num_targets=3, image_size=32)


def test_round_trip(tmp_path):
    path = collect(ENV, tmp_path, num_episodes=20, seed=5, progress=False)
    demos = load_demos(path)
    meta = json.loads((path / "meta.json").read_text())
    assert demos.num_episodes == meta["num_episodes"] == 20
    assert demos.num_steps == meta["num_steps"] == len(demos.image)
    assert meta["success_rate"] >= 0.95 and meta["seeds"] == {"start": 5, "stop": 25}
    assert meta["env"]["image_size"] == 32 and meta["format_version"] == FORMAT_VERSION == 4
    assert demos.image.dtype == np.uint8 and demos.image.shape[1:] == (32, 32, 3)
    assert demos.state.shape == (demos.num_steps, 4) and demos.action.shape == (demos.num_steps, 2)
    # episodes are contiguous and in order
    starts = np.flatnonzero(np.diff(demos.episode, prepend=-1))
    np.testing.assert_array_equal(starts, demos.episode_start)
    # the first frame of each episode is the env's reset observation for its seed
    from vla.envs.reach import ReachEnv

    obs, info = ReachEnv(**ENV).reset(seed=5 + 3)
    np.testing.assert_array_equal(demos.image[demos.episode_start[3]], obs["image"])
    assert demos.instructions[3] == obs["instruction"]
    assert demos.target_pair[demos.episode_start[3]] == info["target_pair"]
    # every shape's centre, per step: the one to reach now is among them
    env = ReachEnv(**ENV)
    env.reset(seed=5 + 3)
    first = demos.episode_start[3]
    assert demos.object_centres.shape == (demos.num_steps, 3, 2)
    np.testing.assert_allclose(demos.object_centres[first], env.object_centres, atol=1e-6)
    gaps = np.abs(demos.object_centres - demos.target_position[:, None]).sum(-1).min(-1)  # [N]
    np.testing.assert_allclose(gaps, 0, atol=1e-6)


def test_parallel_collection_matches_serial(tmp_path):
    a = load_demos(collect(ENV, tmp_path / "a", 24, progress=False))
    b = load_demos(collect(ENV, tmp_path / "b", 24, num_workers=2, progress=False))
    for k in (
        "image",
        "state",
        "action",
        "episode",
        "episode_start",
        "target_pair",
        "object_centres",
    ):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    assert a.instructions == b.instructions


def test_cache_key_follows_the_config(tmp_path):
    base = dataset_path(tmp_path, ENV, 10, 0, 0.3)
    assert base == dataset_path(tmp_path, dict(ENV), 10, 0, 0.3)
    assert base == dataset_path(tmp_path, {**ENV, "render_size": 512}, 10, 0, 0.3)
    others = [
        dataset_path(tmp_path, {**ENV, "num_targets": 4}, 10, 0, 0.3),
        dataset_path(tmp_path, {**ENV, "shared_colours": True}, 10, 0, 0.3),
        dataset_path(tmp_path, ENV, 11, 0, 0.3),
        dataset_path(tmp_path, ENV, 10, 1, 0.3),
        dataset_path(tmp_path, ENV, 10, 0, 0.0),
    ]
    assert len({base, *others}) == 6


def test_a_null_env_value_keeps_the_cache_key_of_the_config_without_it(compose_cfg):
    """An env key added with a null default (env.relation_words) must not rebuild the
    datasets of every existing config; setting it is a new dataset."""
    cfg = compose_cfg("train")
    env = env_kwargs_of(cfg.env)
    assert env["relation_words"] is None
    key = dataset_key(env, cfg.data.num_episodes, cfg.data.seed, cfg.data.noise_std)
    without = {k: v for k, v in env.items() if k != "relation_words"}
    assert key == dataset_key(without, cfg.data.num_episodes, cfg.data.seed, cfg.data.noise_std)
    assert key == "21661faf44ea"  # the default config's dataset before relation_words existed
    nearest = {**env, "relation_words": ["nearest"]}
    assert key != dataset_key(nearest, cfg.data.num_episodes, cfg.data.seed, cfg.data.noise_std)


def test_ensure_reuses_the_cache(tmp_path):
    first = ensure_demos(ENV, tmp_path, 10, 0, 0.3, progress=False)
    stamp = (first.path / "image.npy").stat().st_mtime_ns
    time.sleep(0.01)
    second = ensure_demos(ENV, tmp_path, 10, 0, 0.3, progress=False)
    assert second.path == first.path and (second.path / "image.npy").stat().st_mtime_ns == stamp


def test_truncated_array_is_detected_and_rebuilt(tmp_path):
    path = collect(ENV, tmp_path, 10, progress=False)
    image = path / "image.npy"
    image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    with pytest.raises(DatasetError, match="image.npy"):
        load_demos(path)
    rebuilt = ensure_demos(ENV, tmp_path, 10, 0, 0.3, progress=False)
    assert rebuilt.num_steps == len(rebuilt.image)


def test_meta_that_disagrees_with_arrays_is_refused(tmp_path):
    path = collect(ENV, tmp_path, 10, progress=False)
    meta = json.loads((path / "meta.json").read_text())
    meta["num_steps"] += 1
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="num_steps"):
        load_demos(path)
    (path / "meta.json").write_text("{not json")
    with pytest.raises(DatasetError, match="JSON"):
        load_demos(path)


@pytest.mark.slow
def test_interrupted_collection_leaves_nothing_that_loads(tmp_path):
    code = (
        "import sys\n"
        "from vla.data.collect import collect\n"
        "print('collecting', file=sys.stderr, flush=True)\n"
        f"collect({ENV!r}, {str(tmp_path)!r}, 5000, progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    # wait until collection is under way (5000 episodes take seconds), then kill it
    deadline = time.time() + 60
    while time.time() < deadline and "collecting" not in proc.stderr.readline():
        pass
    time.sleep(1.0)
    assert proc.poll() is None, "collection ended before it could be interrupted"
    proc.kill()
    proc.wait()
    final = dataset_path(tmp_path, ENV, 5000, 0, 0.3)
    assert not final.exists()
    for d in Path(tmp_path).iterdir():
        with pytest.raises(DatasetError):
            load_demos(d)


def test_a_copy_renamed_in_by_another_writer_at_the_same_moment_is_kept(tmp_path, monkeypatch):
    """The race two runs collecting the same set can meet: the other writer's rename lands
    between this one's check for a copy and its own rename (forced here, rare for real)."""
    demos = load_demos(collect(ENV, tmp_path / "a", 4, progress=False), mmap=False)
    arrays = {k: getattr(demos, k) for k in ARRAYS}
    meta = {k: v for k, v in demos.meta.items() if k not in ("format_version", "key", "arrays")}
    final = tmp_path / "data" / demos.path.name
    theirs = tmp_path / "other" / final.name  # the other process's copy, complete
    write_demos(theirs, arrays, demos.instructions, meta)
    rename, racing = os.replace, []

    def other_writer_first(src, dst):
        if Path(dst) == final and not racing:
            racing.append(src)
            rename(theirs, final)  # its rename, just before this one's
        return rename(src, dst)

    monkeypatch.setattr(os, "replace", other_writer_first)
    write_demos(final, arrays, demos.instructions, meta)
    assert racing, "the other writer did not run"
    assert [p.name for p in final.parent.iterdir()] == [final.name]  # nothing half-written
    assert load_demos(final).num_steps == demos.num_steps


COLLECT = """
import sys
from vla.data.prepare import ensure_demos
demos = ensure_demos({env!r}, sys.argv[1], num_episodes=300, seed=0, noise_std=0.3,
                     progress=False)
print(demos.path, demos.num_steps)
"""


@pytest.mark.slow
def test_two_runs_collecting_the_same_set_at_once_end_with_one_complete_copy(tmp_path):
    code = COLLECT.format(env=ENV)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / "data")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    final = dataset_path(tmp_path / "data", ENV, 300, 0, 0.3)
    assert [p.name for p in (tmp_path / "data").iterdir()] == [final.name]
    steps = load_demos(final).num_steps
    assert [out.split() for out, _ in outs] == [[str(final), str(steps)]] * 2  # both read it


def test_seed_ranges_are_disjoint(tmp_path):
    with pytest.raises(
        SeedRangeError, match=r"data.seed=999999995 with 10 episodes .* demonstration"
    ):
        collect(ENV, tmp_path, 10, seed=TEST_SEED_START - 5, progress=False)
    cases = [  # (use, first, num, accepted)
        ("demonstration", 0, 10, True),
        ("demonstration", TEST_SEED_START - 10, 10, True),
        ("demonstration", TEST_SEED_START - 9, 10, False),
        ("test", TEST_SEED_START, 10, True),
        ("test", TEST_SEED_START - 1, 10, False),
        ("test", 0, 200, False),
        ("test", SELECTION_SEED_START - 10, 10, True),
        ("test", SELECTION_SEED_START - 9, 10, False),
        ("selection", SELECTION_SEED_START, 100, True),
        ("selection", TEST_SEED_START, 100, False),
        ("selection", SEED_LIMIT - 10, 10, True),
        ("selection", SEED_LIMIT - 9, 10, False),
    ]
    for use, first, num, accepted in cases:
        if accepted:
            check_seeds(use, first, num, "key")
        else:
            with pytest.raises(SeedRangeError, match=f"key={first} with {num} episodes"):
                check_seeds(use, first, num, "key")


def test_collect_script_reports_and_refuses_bad_values(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    run = [f"hydra.run.dir={tmp_path}/run", f"data.dir={tmp_path}"]
    code, out, err = run_script_here(
        "collect.py", *run, "data.num_episodes=12", "env.image_size=16", capsys=capsys
    )
    assert code == 0, err
    assert "12 episodes" in out
    code, _, err = run_script_here("collect.py", *run, "env.num_targets=9", capsys=capsys)
    assert code != 0
    assert "env.num_targets=9" in err and "Traceback" not in err


def test_a_complete_copy_is_kept_and_only_a_corrupt_one_replaced(tmp_path):
    """Two processes that both found the dataset missing: the second to finish keeps the
    first one's folder (a reader may have it open) instead of swapping its own in."""
    first = collect(ENV, tmp_path, 10, progress=False)
    reader = load_demos(first)  # memory-mapped: its files stay in use
    inode = (first / "image.npy").stat().st_ino
    again = collect(ENV, tmp_path, 10, progress=False)
    assert again == first and (first / "image.npy").stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # no leftovers
    assert reader.num_steps == load_demos(first).num_steps
    (first / "meta.json").write_text("{not json")  # corrupt: the next writer replaces it
    collect(ENV, tmp_path, 10, progress=False)
    assert (first / "image.npy").stat().st_ino != inode and load_demos(first).num_steps > 0
