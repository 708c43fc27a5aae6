"""The vision-language corpus: the task's scenes, each with questions of every family.

    data/vlm-<hash of the config>/
        scenes.npz      image uint8 [N,H,W,3], pairs int [N,M] (-1: no shape), centres [N,M,2],
                        reached int [N] (the shape drawn dimmed, as reached; -1: none)
        examples.npz    scene, family, target, anchor int [E], question/answer str [E]
        manifest.json   the config, counts per family, what is held out, seconds to build

A scene is drawn like the env draws one (`vla.envs.scene`), with the effector somewhere, but
from a wider layout than the demonstrations: 2-4 shapes, colours shared in some scenes, every
size in `target_sizes`, backgrounds and pixel noise in some, one shape drawn as reached (dimmed,
as the env draws the shapes of a chain already reached) in some. That is the "web data": it names
every pair, in scenes the robot never saw. The control corpus (`conf/data/vlm_control.yaml`)
draws scenes as the training env does and holds out what the demonstrations hold out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from vla.envs import render, scene
from vla.envs.grammar import HELD_OUT_PAIRS, HELD_OUT_RELATIONS
from vla.errors import ConfigError
from vla.vlm.questions import FAMILIES, Holdout, ask

CORPUS_VERSION = 4  # part of the hash: a change to how examples are drawn rebuilds the corpus
EFFECTOR_RADIUS = 0.025  # the env's


@dataclass(frozen=True)
class CorpusConfig:
    """What a corpus holds; its hash names the folder.

    Args:
        num_scenes: scenes drawn; each gets one question of every family that has one.
        seed: the scenes' generator seed (`np.random.default_rng(seed)`).
        num_targets: shape counts drawn from uniformly.
        shared_colours: probability that a scene may repeat colours.
        target_sizes: (low, high) of the uniform shape width, arena units.
        background_p, noise_p: probability of a random grey floor, of pixel noise (std <= 20).
        reached_p: probability that one shape is drawn dimmed, as reached (what the chain
            family's "the X then the Y" turns on), in the scenes every family asks about.
        reached_scenes: share of the chain family's questions asked about scenes of their own,
            each with one shape dimmed, which no other family asks about; the chain family
            skips as many of the other scenes, so it still asks `num_scenes` questions
            (without the chain family, no such scenes).
        held_out_pairs, held_out_relations: what no question may touch (the control: the
            demonstrations' held-out sets).
    """

    num_scenes: int = 20000
    seed: int = 0
    num_targets: tuple[int, ...] = (2, 3, 4)
    shared_colours: float = 0.5
    target_sizes: tuple[float, float] = (0.09, 0.19)
    background_p: float = 0.25
    noise_p: float = 0.25
    reached_p: float = 0.0
    reached_scenes: float = 0.5
    held_out_pairs: tuple[int, ...] = ()
    held_out_relations: tuple[str, ...] = ()
    image_size: int = 48
    min_separation: float = 0.2
    families: tuple[str, ...] = field(default=FAMILIES)

    def __post_init__(self):
        unknown = sorted(set(self.families) - set(FAMILIES))
        if unknown or self.num_scenes < 1:
            raise ConfigError(
                f"corpus families={list(self.families)} (known: {list(FAMILIES)}) and "
                f"num_scenes={self.num_scenes} (>= 1) are invalid"
            )
        if not 0 <= self.reached_scenes <= 1:
            raise ConfigError(f"corpus reached_scenes={self.reached_scenes} is not in [0, 1]")

    @property
    def chain_scenes(self) -> int:
        """Scenes of the chain family's own, after the `num_scenes` every family asks about."""
        return round(self.num_scenes * self.reached_scenes) if "chain" in self.families else 0

    @property
    def holdout(self) -> Holdout:
        return Holdout(frozenset(self.held_out_pairs), frozenset(self.held_out_relations))

    def key(self) -> str:
        text = json.dumps([CORPUS_VERSION, asdict(self)], sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:12]


def control_config(**changes) -> CorpusConfig:
    """The control corpus: the training env's layout, its held-out sets held out."""
    values = dict(
        num_targets=(3,), shared_colours=0.0, target_sizes=(0.14, 0.14), background_p=0.0,
        noise_p=0.0, held_out_pairs=HELD_OUT_PAIRS, held_out_relations=HELD_OUT_RELATIONS,
    )  # fmt: skip
    return CorpusConfig(**(values | changes))


def draw_scene(rng: np.random.Generator, cfg: CorpusConfig, reached_one: bool = False):
    """One scene: pairs [M], centres [M,2], the reached shape (frozenset of 0 or 1 index),
    image uint8 [S,S,3]. `reached_one`: a shape is drawn reached whatever `cfg.reached_p`."""
    m = int(cfg.num_targets[int(rng.integers(len(cfg.num_targets)))])
    shared = bool(rng.random() < cfg.shared_colours)
    size = float(rng.uniform(*cfg.target_sizes))
    pairs = scene.sample_pairs(rng, m, shared)
    centres = scene.sample_centres(rng, m, scene.centre_margin(size), cfg.min_separation)
    effector = scene.sample_start(rng, centres, cfg.min_separation)
    floor = render.BACKGROUND
    if rng.random() < cfg.background_p:
        grey = int(rng.integers(8, 80))
        floor = (grey, grey, min(grey + 12, 255))
    dim = rng.random() < cfg.reached_p or reached_one
    reached = frozenset({int(rng.integers(m))}) if dim else frozenset()
    image = render.draw_scene(cfg.image_size, pairs, centres, size / 2, reached, floor)
    render.draw_disc(image, effector, EFFECTOR_RADIUS)
    if rng.random() < cfg.noise_p:
        image = render.add_noise(image, float(rng.uniform(0, 20)), rng)
    return pairs, centres, reached, image


def generate(cfg: CorpusConfig) -> dict[str, np.ndarray]:
    """Every scene and example of a corpus, as arrays."""
    rng = np.random.default_rng(cfg.seed)
    M = max(cfg.num_targets)
    S = cfg.image_size
    plain, N = cfg.num_scenes, cfg.num_scenes + cfg.chain_scenes  # plain scenes, then the chain's
    images = np.empty((N, S, S, 3), np.uint8)
    all_pairs = np.full((N, M), -1, np.int64)
    all_centres = np.zeros((N, M, 2), np.float32)
    all_reached = np.full(N, -1, np.int64)
    no_chain = tuple(f for f in cfg.families if f != "chain")
    rows = []
    for n in range(N):
        pairs, centres, reached, images[n] = draw_scene(rng, cfg, reached_one=n >= plain)
        all_pairs[n, : len(pairs)], all_centres[n, : len(pairs)] = pairs, centres
        all_reached[n] = next(iter(reached), -1)
        if n >= plain:  # the chain's own scenes
            families = ("chain",)
        elif n >= plain - cfg.chain_scenes:  # as many plain scenes the chain skips
            families = no_chain
        else:
            families = cfg.families
        for family in families:
            q = ask(rng, family, pairs, centres, cfg.holdout, reached)
            if q is not None:
                rows.append((n, FAMILIES.index(q.family), q.target, q.anchor, q.question, q.answer))
    scene_idx, family, target, anchor, question, answer = zip(*rows, strict=True)
    return dict(
        image=images,
        pairs=all_pairs,
        centres=all_centres,
        reached=all_reached,
        scene=np.array(scene_idx, np.int64),
        family=np.array(family, np.int64),
        target=np.array(target, np.int64),
        anchor=np.array(anchor, np.int64),
        question=np.array(question),
        answer=np.array(answer),
    )


def corpus_path(root, cfg: CorpusConfig) -> Path:
    return Path(root) / f"vlm-{cfg.key()}"


def ensure_corpus(root, cfg: CorpusConfig) -> dict[str, np.ndarray]:
    """The cached corpus for `cfg`, generated and written first when missing."""
    path = corpus_path(root, cfg)
    if not (path / "manifest.json").exists():
        start = time.perf_counter()
        data = generate(cfg)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # renamed when complete
        tmp.mkdir(parents=True, exist_ok=True)
        np.savez(
            tmp / "scenes.npz", **{k: data[k] for k in ("image", "pairs", "centres", "reached")}
        )
        examples = ("scene", "family", "target", "anchor", "question", "answer")
        np.savez(tmp / "examples.npz", **{k: data[k] for k in examples})
        counts = np.bincount(data["family"], minlength=len(FAMILIES))
        manifest = dict(
            config=asdict(cfg),
            version=CORPUS_VERSION,
            num_scenes=len(data["image"]),
            num_examples=int(len(data["scene"])),
            per_family={f: int(c) for f, c in zip(FAMILIES, counts, strict=True)},
            held_out=dict(pairs=list(cfg.held_out_pairs), relations=list(cfg.held_out_relations)),
            seconds=time.perf_counter() - start,
        )
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        try:
            tmp.rename(path)
        except OSError:  # another process finished the same corpus first: keep its copy
            shutil.rmtree(tmp)
    return load_corpus(path)


def load_corpus(path) -> dict[str, np.ndarray]:
    path = Path(path)
    data = dict(np.load(path / "scenes.npz")) | dict(np.load(path / "examples.npz"))
    data["manifest"] = json.loads((path / "manifest.json").read_text())
    return data
