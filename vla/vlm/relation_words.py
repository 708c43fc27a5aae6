"""A VLM's relation answers by word and by the number of shapes, on fresh scenes of its
held-out distribution; two VLMs on the same questions, paired.

    python -m vla.vlm.relation_words <run A> [<run B>] [--scenes 3000] [--seed 1300000000]

Each scene gets one question for every relation word that has a clear answer in it ("what is
the shape nearest the red circle", "what is the leftmost circle"), drawn as the corpus draws
them, from scenes of the run's `eval_corpus` config with another generator seed. The held-out
answers of a run's metrics.json pool the words, which an even mix of nine hides: a word the
VLM never learnt is a ninth of the family.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from vla.envs.grammar import PAIRS, referent_text
from vla.errors import ConfigError, UserError
from vla.eval.stats import format_rate, mcnemar_exact
from vla.vlm.answer_and_act import BATCH, answers, names_target
from vla.vlm.corpus import draw_scene
from vla.vlm.datamodule import corpus_config
from vla.vlm.questions import RELATION_WORDS, referents


def questions(cfg, num_scenes: int, seed: int) -> dict:
    """{"image" [S',H,W,3] (S' scenes), "scene" [E] (the image each question is about),
    "question", "answer", "word", "shapes" [E]}: every relation word's question with a clear
    answer in each of `num_scenes` scenes of `cfg` (a CorpusConfig, its holdout kept)."""
    if num_scenes < 1:
        raise ConfigError(f"--scenes={num_scenes} must be >= 1")
    rng = np.random.default_rng(seed)
    images, rows = [], []
    for n in range(num_scenes):
        pairs, centres, _, image = draw_scene(rng, cfg)
        images.append(image)
        for word in RELATION_WORDS:
            found = referents(pairs, centres, cfg.holdout, word)
            if found:
                ref, target = found[int(rng.integers(len(found)))]
                answer = " ".join(PAIRS[pairs[target]])
                rows.append((n, f"what is the {referent_text(ref)}", answer, word, len(pairs)))
    scene, question, answer, word, shapes = zip(*rows, strict=True)
    return dict(image=np.stack(images), scene=np.array(scene), question=list(question),
                answer=list(answer), word=list(word), shapes=np.array(shapes))  # fmt: skip


def held_out_config(run: Path):
    """The CorpusConfig of a finished VLM run's held-out scenes (its metrics.json)."""
    metrics = run / "metrics.json"
    if not metrics.is_file() or "eval_corpus" not in (m := json.loads(metrics.read_text())):
        raise ConfigError(f"{run} is not a finished VLM run: no metrics.json with eval_corpus")
    try:
        return corpus_config(m["eval_corpus"])
    except ConfigError as error:  # a run of another version of the code
        raise ConfigError(f"{run}: {error}") from None


def table(data: dict, hits: dict[str, np.ndarray]) -> str:
    """One row per word, all scenes and then by shape count: each run's rate of `hits`
    (bool [E] per run, on the questions of `data`) with its interval, and for two runs the
    questions only A / only B answers right and McNemar's p."""
    names = list(hits)
    lines = [
        "word, shapes: " + " | ".join(names) + (" | only A / only B, p" if len(names) == 2 else "")
    ]
    words, shapes = np.array(data["word"]), data["shapes"]
    for word in RELATION_WORDS:
        for m in [None, *sorted(set(shapes.tolist()))]:
            pick = (words == word) & ((shapes == m) if m is not None else True)
            if not pick.any():
                continue
            cells = [format_rate(float(h[pick].mean()), int(pick.sum())) for h in hits.values()]
            if len(names) == 2:
                a, b = (h[pick] for h in hits.values())
                only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
                cells.append(f"{only_a} / {only_b}, p = {mcnemar_exact(only_a, only_b):.2g}")
            lines.append(f"{word}, {m or 'all'}: " + " | ".join(cells))
    return "\n".join(lines)


def hits_of(policy, data: dict) -> np.ndarray:
    """bool [E]: whether `policy` answers each question of `data` word for word."""
    said = []
    for i in range(0, len(data["question"]), BATCH):
        at = data["scene"][i : i + BATCH]
        said += answers(policy, data["image"][at], data["question"][i : i + BATCH])
    return names_target(said, data["answer"])


def main(argv: list[str] | None = None) -> None:
    from vla.checkpoint import load_policy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="one or two VLM run folders")
    parser.add_argument("--scenes", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1300000000, help="the scenes' generator")
    args = parser.parse_args(argv)
    try:
        if len(args.runs) > 2:
            raise ConfigError(f"one or two runs to compare, not {len(args.runs)}")
        configs = [held_out_config(run) for run in args.runs]
        if configs[0] != configs[-1]:  # as dataclasses: 0 == 0.0
            raise ConfigError(f"{args.runs[0]} and {args.runs[1]} hold out different scenes")
        data = questions(configs[0], args.scenes, args.seed)
        hits = {}
        for run in args.runs:
            policy = load_policy(run / "checkpoints" / "last.ckpt", need_env=False)[0]
            hits[str(run)] = hits_of(policy, data)
    except UserError as error:
        parser.exit(2, f"{error}\n")
    print(f"{len(data['question'])} questions on {args.scenes} scenes (seed {args.seed})")
    print(table(data, hits))


if __name__ == "__main__":
    main()
