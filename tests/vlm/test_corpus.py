"""The corpus covers what it claims; the control and the demonstrations, read back from disk,
hold out what they say they hold out."""

import numpy as np
import pytest

from vla.data.collect import collect
from vla.data.dataset import load_demos
from vla.envs.families import named_pairs
from vla.envs.grammar import HELD_OUT_PAIRS, HELD_OUT_RELATIONS, PAIRS, parse
from vla.envs.referents import resolve
from vla.errors import ConfigError
from vla.models.language import UNK_ID
from vla.vlm.corpus import CorpusConfig, control_config, ensure_corpus
from vla.vlm.questions import FAMILIES
from vla.vlm.vocab import NUMBERS, VLMTokenizer

HELD_NAMES = [" ".join(PAIRS[p]) for p in HELD_OUT_PAIRS]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    full = ensure_corpus(root, CorpusConfig(num_scenes=300, seed=3))
    control = ensure_corpus(root, control_config(num_scenes=300, seed=3))
    return full, control


def test_full_corpus_covers_every_family_pair_size_and_shared_colours(corpora):
    full, _ = corpora
    counts = np.bincount(full["family"], minlength=len(FAMILIES))
    assert (counts >= 290).all() and full["manifest"]["num_examples"] == counts.sum()
    text = " ".join(full["question"]) + " " + " ".join(full["answer"])
    assert all(" ".join(p) in text for p in PAIRS)  # every pair, the held-out ones too
    pairs = full["pairs"]
    colours = [[PAIRS[p][0] for p in row if p >= 0] for row in pairs]
    assert sum(len(set(c)) < len(c) for c in colours) > 30  # scenes with shared colours
    assert {int((row >= 0).sum()) for row in pairs} == {2, 3, 4}
    tok = VLMTokenizer()
    assert (tok.encode(list(full["question"])) != UNK_ID).all()  # every word is in the vocabulary


def test_answers_are_true_of_their_scenes(corpora):
    full, _ = corpora
    for i in np.flatnonzero(full["family"] == FAMILIES.index("count"))[:100]:
        q, pairs = str(full["question"][i]).split(), full["pairs"][full["scene"][i]]
        names = [PAIRS[p] for p in pairs if p >= 0]
        kind = q[2]
        n = sum(c == kind for c, _ in names) if q[3] == "shapes" and kind != "shapes" else None
        if n is None:
            n = sum(kind in ("shapes", s + "s") for _, s in names)
        assert full["answer"][i] == NUMBERS[n]
    for i in np.flatnonzero(full["family"] == FAMILIES.index("relation"))[:100]:
        s = full["scene"][i]
        m = int((full["pairs"][s] >= 0).sum())
        pairs, centres = list(full["pairs"][s][:m]), full["centres"][s][:m]
        ref = parse("reach the " + str(full["question"][i]).removeprefix("what is the ")).referents[
            0
        ]
        assert " ".join(PAIRS[pairs[resolve(ref, pairs, centres)]]) == full["answer"][i]


def test_anchors_are_the_shapes_relations_and_spatial_questions_are_measured_from(corpora):
    full, _ = corpora
    seen = {"nearest": 0, "superlative": 0, "spatial": 0}
    for i in range(len(full["scene"])):
        q, anchor, pairs = (
            str(full["question"][i]),
            full["anchor"][i],
            full["pairs"][full["scene"][i]],
        )
        family = FAMILIES[full["family"][i]]
        if family == "spatial":  # "is the A above the B": B
            assert " ".join(PAIRS[pairs[anchor]]) == q.split(" the ")[-1]
            seen["spatial"] += 1
        elif family == "relation" and " the " in q.removeprefix("what is the "):  # "... the X"
            assert " ".join(PAIRS[pairs[anchor]]) == q.split(" the ")[-1]
            seen["nearest"] += "nearest" in q
        elif family == "relation":  # "what is the leftmost shape": no other shape
            assert anchor == -1
            seen["superlative"] += 1
        else:
            assert anchor == -1
    assert min(seen.values()) > 20


def test_chain_points_at_the_first_shape_not_yet_reached_which_is_drawn_dimmed(corpora):
    full, _ = corpora
    rows = np.flatnonzero(full["family"] == FAMILIES.index("chain"))
    firsts = 0
    for i in rows:
        s = full["scene"][i]
        names = [" ".join(PAIRS[p]) if p >= 0 else "" for p in full["pairs"][s]]
        first, then = str(full["question"][i]).removeprefix("where is the ").split(" then the ")
        reached = full["reached"][s]
        expected = then if reached >= 0 else first
        assert reached < 0 or names[reached] == first, (full["question"][i], names, reached)
        assert names[full["target"][i]] == expected
        firsts += reached < 0
    assert 0.4 < firsts / len(rows) < 0.6  # half the chains have gone past their first shape
    # a reached shape is drawn dimmed: its centre pixel is darker than in the same scene redrawn
    from vla.envs import render

    s = int(np.flatnonzero(full["reached"] >= 0)[0])
    m = int((full["pairs"][s] >= 0).sum())
    pairs, centres, r = list(full["pairs"][s][:m]), full["centres"][s][:m], full["reached"][s]
    bright = render.draw_scene(48, pairs, centres, 0.045)
    x, y = np.clip((centres[r] * 48).astype(int), 0, 47)
    assert full["image"][s][y, x].sum() < bright[y, x].sum()


def test_reached_scenes_move_chain_questions_to_dimmed_scenes_no_other_family_sees(tmp_path):
    cfg = CorpusConfig(num_scenes=200, seed=5, reached_p=0.0, reached_scenes=0.25)
    data = ensure_corpus(tmp_path, cfg)
    assert len(data["image"]) == data["manifest"]["num_scenes"] == 250
    dimmed = data["reached"][data["scene"]] >= 0  # [E]: asked about a scene with a shape reached
    chain = data["family"] == FAMILIES.index("chain")
    assert chain.sum() == 200 and dimmed.sum() == 50  # the chain still asks num_scenes times
    assert chain[dimmed].all() and not dimmed[~chain].any()
    assert (data["reached"][:200] < 0).all() and (data["reached"][200:] >= 0).all()
    asked = np.unique(data["scene"][chain])  # the chain skips scenes 150-199, asks 200-249
    assert asked.tolist() == list(range(150)) + list(range(200, 250))
    assert CorpusConfig(families=("caption", "pointing")).chain_scenes == 0  # no chain, no scenes
    with pytest.raises(ConfigError, match="reached_scenes"):
        CorpusConfig(reached_scenes=1.5)


def test_control_read_back_from_disk_never_touches_what_the_demonstrations_hold_out(corpora):
    _, control = corpora
    assert control["manifest"]["held_out"]["pairs"] == list(HELD_OUT_PAIRS)
    for q, a in zip(control["question"], control["answer"], strict=True):
        assert not any(n in q or n in a for n in HELD_NAMES), (q, a)
        asked = [k.replace(":", " the ") for k in HELD_OUT_RELATIONS if " " in k.split(":")[1]]
        asked += [k.replace(":", " ") for k in HELD_OUT_RELATIONS if " " not in k.split(":")[1]]
        assert not any(k in q for k in asked), q  # "left of the yellow circle", "leftmost triangle"
    targets = control["target"] >= 0
    target_pairs = control["pairs"][control["scene"][targets], control["target"][targets]]
    assert not np.isin(target_pairs, HELD_OUT_PAIRS).any()
    assert np.isin(control["pairs"], HELD_OUT_PAIRS).any()  # they are still in the scenes
    assert len(control["scene"]) > 1200


def test_demonstrations_read_back_from_disk_never_name_or_target_a_held_out_pair(tmp_path):
    env = dict(families=["name", "attribute", "relation", "sequence"])
    demos = load_demos(collect(env, tmp_path, 40, 0, 0.3, progress=False))
    for text in demos.instructions:
        named = [p for r in parse(text).referents for p in named_pairs(r)]
        assert not any(PAIRS.index(p) in HELD_OUT_PAIRS for p in named), text
    assert not np.isin(np.asarray(demos.target_pair), HELD_OUT_PAIRS).any()


def test_every_corpus_config_is_scored_on_the_same_held_out_scenes_and_the_control_is_one():
    from dataclasses import replace

    from tests.builders import compose_config
    from vla.vlm.datamodule import corpus_config

    def data(name):
        return compose_config("train", ["experiment=vlm", f"data={name}"]).data

    full, env, control = data("vlm"), data("vlm_env"), data("vlm_control")
    assert corpus_config(env.eval_corpus) == corpus_config(full.eval_corpus)
    assert corpus_config(control.eval_corpus) == corpus_config(full.eval_corpus)
    expected = control_config(num_scenes=full.corpus.num_scenes)  # the read-back test's
    assert corpus_config(control.corpus) == expected
    held = dict(held_out_pairs=(), held_out_relations=())
    assert corpus_config(env.corpus) == replace(expected, **held)  # nothing held out


def test_validation_scenes_are_neither_trained_on_nor_reported(tmp_path):
    from tests.builders import compose_config
    from vla.errors import ConfigError
    from vla.vlm.datamodule import VLMDataModule

    def module(*overrides):
        cfg = compose_config("train", ["experiment=vlm", *overrides]).data
        kwargs = {k: v for k, v in cfg.items() if k != "_target_"}
        return VLMDataModule(env={}, **kwargs | dict(dir=str(tmp_path)))

    small = ["data.corpus.num_scenes=40", "data.eval_corpus.num_scenes=40", "data.val_scenes=40"]
    dm = module(*small)
    dm.prepare_data()
    scenes = {k: {r.tobytes() for r in dm.raw[k]["centres"]} for k in ("corpus", "eval", "val")}
    assert len(scenes["val"]) == 40 + 20  # and the chain family's own dimmed scenes
    assert len(scenes["val"] & scenes["corpus"]) == len(scenes["val"] & scenes["eval"]) == 0
    assert dm.val_cfg.num_targets == dm.corpus_cfg.num_targets  # the training distribution
    with pytest.raises(ConfigError, match="data.val_seed"):
        module("data.val_seed=${data.eval_corpus.seed}")
