"""The shape tour (scripts/tour.py): every shape it prints is the model's own, read back from
its printed text and held to what the policy's parts compute on the same batch."""

from __future__ import annotations

import re

import pytest
import torch

from tests.builders import compose_config, run_script_here
from vla.config import instantiate
from vla.envs.config import env_kwargs_of
from vla.eval.observation import prepare_observation
from vla.models.language import masked_mean
from vla.models.policy import VLAPolicy
from vla.models.vision import normalize_pixels
from vla.tour import real_batch

LINE = re.compile(r"^  (?P<name>\S+)\s+(?P<dims>\[[\w*,]+\])\s+(?P<shape>\[[\d, ]+\])")


def parse(printed: str) -> tuple[dict, dict, dict, list[str]]:
    """(sizes, {stage: (dims, shape)}, layout {group: (start, stop)}, the check lines)."""
    lines = printed.splitlines()
    sizes_line = next(line for line in lines if line.startswith("sizes "))
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in sizes_line.split()[1:])}
    stages = {}
    for line in lines:
        if m := LINE.match(line):
            shape = tuple(int(d) for d in m["shape"].strip("[]").split(","))
            stages[m["name"]] = (m["dims"], shape)
    layout_line = next(line for line in lines if line.startswith("layout "))
    layout = {}
    for group in layout_line.removeprefix("layout ").split(" | "):
        name, span = group.split()
        layout[name] = tuple(int(x) for x in span.split(":"))
    return sizes, stages, layout, [line for line in lines if line.startswith(("check", "T ="))]


def reference_shapes(policy: VLAPolicy, obs: dict) -> dict[str, tuple[int, ...]]:
    """Each stage's shape, from the policy's parts called directly on the batch."""
    image, state, tokens, _ = prepare_observation(obs, policy.tokenizer, torch.device("cpu"))
    B, L = tokens.shape
    T, H = policy.num_tokens(L), policy.encoder.n_heads
    with policy.inference():
        words, pad_mask = policy.text_encoder(tokens)
        instruction = masked_mean(words, pad_mask)
        enc = policy.encode(image, state, tokens, need_weights=True)
        ref = {"image": image.shape, "state": state.shape, "tokens": tokens.shape}
        ref |= {"words": words.shape, "pad_mask": pad_mask.shape, "instruction": instruction.shape}
        pixels = policy.image_encoder.patchify(normalize_pixels(image))
        ref["patch_pixels"] = pixels.shape
        ref["patch_embed"] = policy.image_encoder.patch_embed(pixels).shape
        ref["patches"] = policy.image_encoder(image, policy.film, instruction).shape
        for name, source in policy.sources.items():
            group = source(image, instruction)
            ref[name] = group.tokens.shape
            ref |= {out: value.shape for out, value in group.outputs.items()}
        ref["state_token"] = policy.state_encoder(state).shape
        ref["sequence"] = (B, T, policy.d_model)
        ref["key_padding_mask"] = (B, T)
        for i, w in enumerate(enc.weights[: policy.encoder.depth]):
            Dh = policy.d_model // policy.encoder.blocks[i].attn.n_heads
            for part in ("q", "k", "v", "attended"):
                ref[f"layer{i}.{part}"] = (B, H, T, Dh)
            ref |= {f"layer{i}.scores": w.shape, f"layer{i}.weights": w.shape}
            ref |= {
                f"layer{i}.norm1": (B, T, policy.d_model),
                f"layer{i}.out": (B, T, policy.d_model),
            }
        if not policy.readout.in_sequence:  # "cross": the queries' own attention, last
            ref["readout.weights"] = enc.weights[-1].shape
        ref["encoded"] = (B, T, policy.d_model)
        ref["readout"] = ref["features"] = enc.features.shape
        ref["head.predict"] = policy.head.predict(enc.features).shape
    ref["actions"] = policy.predict_chunk_tensors(image, state, tokens).shape
    return {k: tuple(v) for k, v in ref.items()}


CROSS_FLOW = ("model=tiny", "model.readout.mode=cross", "model/head=flow", "model.chunk_size=4")


@pytest.mark.parametrize("args", [("model=small",), ("model=tiny",), CROSS_FLOW])
def test_every_printed_shape_is_the_models_own(args, tmp_path, capsys):
    code, out, err = run_script_here("tour.py", *args, f"hydra.run.dir={tmp_path}", capsys=capsys)
    assert code == 0, err
    sizes, stages, layout, checks = parse(out)
    cfg = compose_config("tour", list(args))
    torch.manual_seed(cfg.seed)
    policy = instantiate(cfg.model)
    obs = real_batch(env_kwargs_of(cfg.env), cfg.tour.batch_size, cfg.tour.seed)
    ref = reference_shapes(policy, obs)
    assert set(stages) == set(ref)  # every stage printed, and only those, is checked
    for name, (_, shape) in stages.items():
        assert shape == ref[name], name
    # the letters name the sizes they stand for
    L = sizes["L"]
    assert sizes["Np"] == policy.image_encoder.num_patches
    assert (sizes["D"], sizes["H"], sizes["Dh"]) == (
        policy.d_model,
        policy.encoder.n_heads,
        policy.d_model // policy.encoder.n_heads,
    )
    assert (
        sizes["T"] == policy.num_tokens(L) and sizes["Nk"] == policy.sources["keypoints"].num_tokens
    )
    for name, (dims, shape) in stages.items():
        axes = dims.strip("[]").split(",")
        assert [eval(a, {}, dict(sizes)) for a in axes] == list(shape), name  # noqa: S307
    # the layout is the policy's, counted out to T
    assert layout == {k: (s.start, s.stop) for k, s in policy.token_layout(L).items()}
    count = next(c for c in checks if c.startswith("T ="))
    parts = [int(p.split()[0]) for p in count.split("=")[1].split("+")]
    assert sum(parts) == int(count.split("=")[-1]) == sizes["T"]
    assert count.startswith(f"T = {sizes['Np']} patches + {sizes['Nk']} keypoints + {L} words")


def test_pad_columns_of_every_layer_are_exactly_zero(tmp_path, capsys):
    code, out, err = run_script_here(
        "tour.py", "model=tiny", f"hydra.run.dir={tmp_path}", capsys=capsys
    )
    assert code == 0, err
    _, stages, _, checks = parse(out)
    pads = [c for c in checks if "weights on PAD keys" in c]
    assert len(pads) == 2  # model=tiny: 2 layers
    assert "sample 0 key" in pads[0]  # the batch has a PAD word
    assert all(c.endswith("max 0") for c in pads)
    recomputed = next(c for c in checks if "recomputed weights" in c)
    assert float(recomputed.split()[-1]) < 1e-6


def test_the_plain_recipe_has_patches_words_state_and_readout_only(tmp_path, capsys):
    args = ("model/keypoints=none", "model/film=none", "model.image_encoder.coord_features=false")
    code, out, err = run_script_here("tour.py", *args, f"hydra.run.dir={tmp_path}", capsys=capsys)
    assert code == 0, err
    sizes, stages, layout, checks = parse(out)
    assert list(layout) == ["image", "text", "state", "readout"] and "keypoints" not in stages
    assert "FiLM off, CoordConv off" in out
    assert sizes["T"] == 9 + sizes["L"] + 1 + 1


def test_a_batch_of_one_is_refused_in_one_line(tmp_path, capsys):
    code, _, err = run_script_here(
        "tour.py", "tour.batch_size=1", f"hydra.run.dir={tmp_path}", capsys=capsys
    )
    assert (
        code == 2 and err.strip() == "error: tour.batch_size=1 must be >= 2 (a batch with padding)"
    )
