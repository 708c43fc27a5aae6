"""Two VLMs on the same held-out questions, paired: per family, how often each is right, how
often only one of them is, and the exact McNemar p-value (the test the suite uses to compare
two policies on the same episodes).

    python -m vla.vlm.paired <run A> <run B>      # run folders of experiment=vlm or rt2
    python -m vla.vlm.paired <run A> <run B> --seed 1600000000   # fresh scenes, same config

Each run's last checkpoint (the weights its metrics.json's `answers` were measured on) answers
the run's held-out scenes (metrics.json's `eval_corpus`, read from the run's data folder, or
generated again, as deterministic as the first time). Both runs must have been scored on the
same scenes; a pair that was not is refused. `--seed` draws fresh scenes of the same config
from another generator seed: a block no run was ever scored or selected on.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

import torch

from vla.checkpoint import load_policy
from vla.errors import ConfigError, UserError
from vla.eval.stats import mcnemar_exact, wilson_interval
from vla.vlm.corpus import ensure_corpus
from vla.vlm.data import CorpusTensors, fixed_batches
from vla.vlm.datamodule import corpus_config
from vla.vlm.model import VLMPolicy
from vla.vlm.questions import FAMILIES
from vla.vlm.scoring import score_answers


def held_out(run: Path, seed: int | None = None) -> tuple[dict, VLMPolicy, CorpusTensors]:
    """(the held-out corpus's config, the run's last weights, the corpus as tensors): the run's
    held-out scenes or, given a seed, fresh ones drawn the same way."""
    if not (run / "metrics.json").is_file():
        raise ConfigError(f"{run} is not a finished VLM run: it has no metrics.json")
    metrics = json.loads((run / "metrics.json").read_text())
    if "eval_corpus" not in metrics:
        raise ConfigError(f"{run} is not a VLM run: its metrics.json has no eval_corpus")
    try:
        eval_cfg = corpus_config(metrics["eval_corpus"])
    except ConfigError as error:  # a run of another version of the code
        raise ConfigError(f"{run}: {error}") from None
    if seed is not None:
        eval_cfg = replace(eval_cfg, seed=seed)
    policy, _ = load_policy(run / "checkpoints" / "last.ckpt", need_env=False)
    data = metrics["corpus"]["path"]  # the run's data.dir: cached there, or generated again
    return asdict(eval_cfg), policy, CorpusTensors(ensure_corpus(data, eval_cfg), policy.tokenizer)


def held_out_hits(run: Path, seed: int | None = None) -> tuple[dict, list[str], list[bool]]:
    """(the held-out corpus's config, family of each example, whether run's answer is right),
    on the run's held-out scenes or, given a seed, on fresh ones drawn the same way."""
    scenes, policy, corpus = held_out(run, seed)
    families, hits = [], []
    for batch in fixed_batches(corpus, torch.arange(len(corpus)), 256):
        f, h = score_answers(policy, batch)
        families, hits = families + f, hits + h
    return scenes, families, hits


def compare(run_a: Path, run_b: Path, seed: int | None = None) -> dict:
    """Per family and for all families together: each run's accuracy with its 95% interval,
    the examples only A / only B answers right, and McNemar's p."""
    scenes_a, families, a = held_out_hits(run_a, seed)
    scenes_b, families_b, b = held_out_hits(run_b, seed)
    if corpus_config(scenes_a) != corpus_config(scenes_b) or families != families_b:
        raise ConfigError(f"{run_a} and {run_b} were scored on different held-out scenes: "
                          f"{scenes_a} against {scenes_b}")  # fmt: skip
    rows = {}
    for family in [*FAMILIES, "all"]:
        pick = [i for i, f in enumerate(families) if family in (f, "all")]
        n = len(pick)
        if n == 0:
            continue
        right_a, right_b = sum(a[i] for i in pick), sum(b[i] for i in pick)
        only_a = sum(a[i] and not b[i] for i in pick)
        only_b = sum(b[i] and not a[i] for i in pick)
        rows[family] = dict(
            n=n, a=right_a / n, a_ci95=wilson_interval(right_a, n), b=right_b / n,
            b_ci95=wilson_interval(right_b, n), only_a=only_a, only_b=only_b,
            p=mcnemar_exact(only_a, only_b),
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--seed", type=int, help="fresh held-out scenes from this generator seed")
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    try:
        rows = compare(args.run_a, args.run_b, args.seed)
    except UserError as error:  # one line, status 2, as the scripts print it (vla.cli)
        parser.exit(2, f"{error}\n")
    print(f"A: {args.run_a}\nB: {args.run_b}")
    print(
        f"{'family':<10} {'n':>5} {'A':>7} {'B':>7} {'only A':>7} {'only B':>7} {'McNemar p':>10}"
    )
    for family, r in rows.items():
        print(f"{family:<10} {r['n']:>5} {r['a']:>7.1%} {r['b']:>7.1%} {r['only_a']:>7} "
              f"{r['only_b']:>7} {r['p']:>10.3g}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
