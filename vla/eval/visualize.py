"""visualize(cfg): PNGs of the readout's attention over patches and words, per layer, and for
a policy with object tokens, what each slot found and which one the pointer picked.

With action chunks the action executed at step t was predicted at the last query step q <= t,
so the picture for step t shows that query's observation and attention (its caption says so).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig
from PIL import Image

from vla.checkpoint import load_policy
from vla.data.seeds import check_seeds
from vla.envs.config import env_changes
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.attention import episode_attention_figures
from vla.eval.objects_figure import objects_figure, slot_maps
from vla.eval.runner import PolicyRunner
from vla.keys import IMAGE, INSTRUCTION, STATE
from vla.run_folder import resolve_ckpt_path
from vla.runtime import configure_torch

log = logging.getLogger(__name__)


def visualize(cfg: DictConfig) -> list[Path]:
    n, seed = cfg.viz.num_episodes, cfg.viz.seed
    if n is None or n <= 0:
        raise ConfigError(f"viz.num_episodes={n} must be > 0")
    check_seeds("test", seed, n, "viz.seed")
    steps = sorted(int(s) for s in cfg.viz.steps)
    if not steps or steps[0] < 0:
        raise ConfigError(f"viz.steps={steps} must be a non-empty list of steps >= 0")
    configure_torch()
    ckpt_path = resolve_ckpt_path(cfg.ckpt_path)
    policy, env_kwargs = load_policy(ckpt_path)
    env_kwargs.update(env_changes(cfg.env))
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = ReachEnv(**{**env_kwargs, "render_mode": "rgb_array"})
    runner = PolicyRunner(policy)
    written = []
    for e in range(n):
        obs, _ = env.reset(seed=seed + e)
        runner.reset()
        for t in range(steps[-1] + 1):
            if runner.needs_query()[0]:  # this step's action comes from a query on obs
                query_step, query_obs, query_frame = t, obs, env.render()
            if t in steps:
                batch = {
                    IMAGE: query_obs[IMAGE][None],
                    STATE: query_obs[STATE][None],
                    INSTRUCTION: [query_obs[INSTRUCTION]],
                }
                note = f"step {t}" + (f" (chunk of step {query_step})" if query_step != t else "")
                (figure,) = episode_attention_figures(policy, batch, [query_frame], [note])
                path = out_dir / f"attention_ep{e:02d}_t{t:02d}.png"
                Image.fromarray(figure).save(path)
                written.append(path)
                if "objects" in getattr(policy, "sources", {}):
                    where, xy, probs = slot_maps(policy, batch)
                    figure = objects_figure(
                        query_frame, where[0], xy[0], None if probs is None else probs[0],
                        query_obs[INSTRUCTION], note,
                    )  # fmt: skip
                    path = out_dir / f"objects_ep{e:02d}_t{t:02d}.png"
                    Image.fromarray(figure).save(path)
                    written.append(path)
            obs, _, terminated, truncated, _ = env.step(runner.act(obs))
            if terminated or truncated:
                break
    log.info(f"{len(written)} pictures written to {out_dir}")
    return written
