"""Where a VLM's keypoint 0 looks at each stage of "reach the X then the Y", and where the
episodes it fails end: the measurement behind the corpus's chain family (docs/vlm.md, round 11).

    python -m vla.vlm.stages <checkpoint> [episodes=30] [first seed=1000010100]

    each sequence episode, run by the playground's `play` exactly as evaluation runs it
      each query: keypoint 0 [2] ─ nearest shape ─> now | reached | later | other
                  (now: the shape the env asks for at this step; reached: one already reached,
                   drawn dimmed; later: one of the chain still to come; other: not in the chain)
      a failure: the effector's nearest shape and the stage it stopped at

A keypoint on `now` is what the keypoint loss of both stages trains for; a policy whose
keypoint 0 leaves `now` once the first shape is dimmed has not learned what "then" asks.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from vla.envs.reach import ReachEnv
from vla.errors import UserError
from vla.play.episode import Scene, play

KINDS = ("now", "reached", "later", "other")


def nearest_kind(point, centres: np.ndarray, targets, stage: int) -> str:
    """Which part of the chain the shape nearest `point` [2] is (`KINDS`)."""
    near = int(np.linalg.norm(centres - np.asarray(point), axis=1).argmin())
    if near == targets[stage]:
        return "now"
    if near in targets[:stage]:
        return "reached"
    return "later" if near in targets[stage:] else "other"


def keypoint_stages(policy, env_config: dict, seeds) -> dict:
    """{"queries": {stage: Counter of KINDS}, "failures": Counter of (stage, kind),
    "episodes": n, "successes": k} over one sequence episode per seed."""
    queries: dict[int, Counter] = {}
    failures, successes, seeds = Counter(), 0, list(seeds)
    for seed in seeds:
        scene = Scene(seed, env_config.get("num_targets", 3), False, "sequence")
        env = ReachEnv(**scene.env_kwargs(env_config))
        env.reset(seed=seed)  # the episode's scene, as `play` draws it
        centres, targets = env.object_centres, env.target_order
        for step in play(policy, env_config, scene):
            if step.done:
                break
            if step.query.step == step.t:  # a query made at this step
                stage = step.info["targets_reached"]
                kind = nearest_kind(step.query.keypoints[0], centres, targets, stage)
                queries.setdefault(stage, Counter())[kind] += 1
        successes += step.success
        if not step.success:
            stage = min(step.info["targets_reached"], len(targets) - 1)
            failures[stage, nearest_kind(step.position, centres, targets, stage)] += 1
    return dict(queries=queries, failures=failures, episodes=len(seeds), successes=successes)


def report(result: dict) -> str:
    lines = [f"success {result['successes']} of {result['episodes']} sequence episodes"]
    for stage, kinds in sorted(result["queries"].items()):
        n = sum(kinds.values())
        shares = ", ".join(f"{k} {kinds[k] / n:.0%}" for k in KINDS if kinds[k])
        lines.append(f"  keypoint 0 after {stage} reached ({n} queries): {shares}")
    ends = ", ".join(
        f"{s} reached, near {k}: {n}" for (s, k), n in sorted(result["failures"].items())
    )
    lines.append(f"  failures (stopped after, nearest shape): {ends or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import torch

    from vla.checkpoint import load_policy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint file or a pretrained folder")
    parser.add_argument("episodes", type=int, nargs="?", default=30)
    parser.add_argument("first_seed", type=int, nargs="?", default=1000010100)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        policy, env_config = load_policy(args.checkpoint)
    except UserError as error:  # one line, status 2, as the scripts print it (vla.cli)
        parser.exit(2, f"{error}\n")
    print(args.checkpoint)
    seeds = range(args.first_seed, args.first_seed + args.episodes)
    print(report(keypoint_stages(policy, env_config, seeds)))


if __name__ == "__main__":
    main()
