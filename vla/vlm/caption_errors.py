"""What a VLM gets wrong in its captions: each wrong caption of the held-out scenes sorted
into one kind, and right captions by the number of shapes in the scene.

    python -m vla.vlm.caption_errors <run>                    # a run of experiment=vlm or rt2
    python -m vla.vlm.caption_errors <run> --seed 1600000000  # fresh scenes, same config

Beside them, which shape a caption names for each true shape: over captions of the right
length, the pairs whose colour is right (a circle read as a square shows here).

A caption lists the scene's shapes as colour-shape pairs in pair order ("blue square red
circle"). The kinds, the first that fits:
    order    the right pairs in another order
    missing  fewer pairs, every one of them in the scene
    extra    more pairs, every pair of the scene among them
    colour   as many pairs, each wrong one with the right shape and another colour
    shape    as many pairs, each wrong one with the right colour and another shape
    other    anything else (a colour and a shape both wrong, or a wrong length with a wrong pair)
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch

from vla.envs.grammar import SHAPES
from vla.errors import UserError
from vla.vlm.paired import held_out
from vla.vlm.questions import FAMILIES
from vla.vlm.scoring import greedy_answers

KINDS = ("order", "missing", "extra", "colour", "shape", "other")


def pairs(caption: str) -> list[tuple[str, ...]]:
    """ "red circle blue square" -> [("red", "circle"), ("blue", "square")]."""
    words = caption.split()
    return [tuple(words[i : i + 2]) for i in range(0, len(words), 2)]


def kind(predicted: str, answer: str) -> str:
    """ "right", or the kind of a wrong caption (the module's docstring)."""
    p, a = pairs(predicted), pairs(answer)
    if p == a:
        return "right"
    if sorted(p) == sorted(a):
        return "order"
    if len(p) < len(a) and set(p) <= set(a):
        return "missing"
    if len(p) > len(a) and set(a) <= set(p):
        return "extra"
    if len(p) == len(a):
        wrong = [(x, y) for x, y in zip(p, a, strict=True) if x != y]
        if all(len(x) == 2 and x[1] == y[1] for x, y in wrong):
            return "colour"
        if all(len(x) == 2 and x[0] == y[0] for x, y in wrong):
            return "shape"
    return "other"


def named_shapes(predicted: str, answer: str) -> list[tuple[str, str]]:
    """(true shape, named shape) of each pair whose colour is right, in a caption of the right
    length ([] for one of another length)."""
    p, a = pairs(predicted), pairs(answer)
    if len(p) != len(a):
        return []
    return [(y[1], x[1]) for x, y in zip(p, a, strict=True) if len(x) == 2 and x[0] == y[0]]


def caption_errors(run: Path, seed: int | None = None) -> dict:
    """{n, right, <kind>: count, by_shapes: {shapes in the scene: [right, n]}, named: {true
    shape: {named shape: count}}} over the run's held-out captions (or fresh ones from
    `seed`)."""
    _, policy, corpus = held_out(run, seed)
    idx = torch.nonzero(corpus.family == FAMILIES.index("caption")).flatten()
    counts, right, total, named = Counter(), Counter(), Counter(), Counter()
    for chunk in idx.split(256):
        answers = [corpus.answers[i] for i in chunk.tolist()]
        for predicted, answer in zip(
            greedy_answers(policy, corpus.batch(chunk))[0], answers, strict=True
        ):
            k, shapes = kind(predicted, answer), len(pairs(answer))
            counts[k] += 1
            total[shapes] += 1
            right[shapes] += k == "right"
            named.update(named_shapes(predicted, answer))
    return dict(
        n=len(idx), right=counts["right"], **{k: counts[k] for k in KINDS},
        by_shapes={n: [right[n], total[n]] for n in sorted(total)},
        named={t: {s: named[t, s] for s in SHAPES} for t in SHAPES},
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--seed", type=int, help="fresh held-out scenes from this generator seed")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args(argv)
    try:
        r = caption_errors(args.run, args.seed)
    except UserError as error:  # one line, status 2, as the scripts print it (vla.cli)
        parser.exit(2, f"{error}\n")
    print(f"{args.run}: {r['right']} of {r['n']} captions right")
    wrong = r["n"] - r["right"]
    for k in KINDS:
        print(f"  {k:<8} {r[k]:>5}  ({r[k] / max(wrong, 1):.0%} of the wrong ones)")
    shapes = ", ".join(f"{n} shapes {k}/{t}" for n, (k, t) in r["by_shapes"].items())
    print(f"right by scene: {shapes}")
    print("shape named (columns) for each true shape (rows), pairs of the right colour:")
    for t, row in r["named"].items():
        print(f"  {t:<9}" + "".join(f" {s} {k:>4}" for s, k in row.items()))
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
