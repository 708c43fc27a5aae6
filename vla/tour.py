"""The shape tour: one real batch of observations through the policy, each stage with its shape.

    python scripts/tour.py [model=tiny] [ckpt_path=<run>] [tour.batch_size=3]

Attention as a lesson draws it, on the policy's own tensors:

    image [B,Hi,Wi,3] ─ patches [B,Np,D]    tokens [B,L] ─ words [B,L,D]    state ─ [B,1,D]
    (token sources, e.g. keypoints [B,Nk,D])                  readout queries [B,R,D]
        ─ concatenated ─> sequence [B,T,D], T counted out from `policy.token_layout`
        ─ per layer: q, k, v [B,H,T,Dh] ─ q k^T / sqrt(Dh) ─ scores [B,H,T,T]
          ─ PAD keys masked ─ softmax ─ weights [B,H,T,T] (PAD columns exactly 0) ─ @ v
        ─ readout features [B,R,D] ─ head ─> action chunk [B,K,A]

Nothing is recomputed by a copy of the model's code: forward hooks record what
`VLAPolicy.encode` itself computes, and only Q, K, V and the scores (which no module returns)
are computed again from each block's own `to_q`/`to_kv`, checked against the weights `encode`
returns. The batch comes from the env's own resets; its second observation is the first one
whose instruction has another length, so the batch has PAD words to mask.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from einops import rearrange
from omegaconf import DictConfig

from vla import keys
from vla.data.seeds import check_seeds
from vla.envs.config import env_kwargs_of
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.observation import prepare_observation
from vla.models.attention import build_allowed_mask, scaled_dot_product
from vla.models.policy import VLAPolicy

SEARCH = 50  # reset seeds looked through for instructions of differing lengths
SAID = {"image": "patches", "text": "words"}  # token_layout's group names, as a lesson says them


@dataclass
class Stage:
    """One printed line: a tensor's name, its shape in the axis legend's letters, its shape."""

    name: str
    dims: str  # e.g. "[B,H,T,Dh]"
    shape: tuple[int, ...]
    note: str = ""


@dataclass
class Tour:
    """Everything the tour prints, as data (tests read it back from the printed text)."""

    sizes: dict[str, int]
    layout: dict[str, slice]
    instructions: list[str]
    stages: list[Stage] = field(default_factory=list)
    pad_max: list[float] = field(default_factory=list)  # per layer: largest weight on a PAD key
    weights_error: float = 0.0  # max |recomputed weights - encode's weights| over the layers
    pad_keys: list[tuple[int, int]] = field(default_factory=list)  # (sample, key) of PAD keys

    def add(self, name: str, dims: str, tensor: torch.Tensor, note: str = "") -> None:
        self.stages.append(Stage(name, dims, tuple(tensor.shape), note))


def real_batch(env_kwargs: dict, batch_size: int, seed: int) -> dict:
    """`batch_size` reset observations of the env (numpy, batched), from seeds `seed, ...`,
    the second the first whose instruction's length differs from the first's."""
    if batch_size < 2:
        raise ConfigError(f"tour.batch_size={batch_size} must be >= 2 (a batch with padding)")
    check_seeds("test", seed, SEARCH + batch_size, "tour.seed")
    env = ReachEnv(**{**env_kwargs, "render_mode": None})
    obs = [env.reset(seed=seed + i)[0] for i in range(SEARCH + batch_size)]
    env.close()
    length = [len(o[keys.INSTRUCTION].split()) for o in obs]
    other = next((i for i in range(1, SEARCH) if length[i] != length[0]), 1)
    picked = [obs[0], obs[other]] + [o for i, o in enumerate(obs[1:], 1) if i != other]
    picked = picked[:batch_size]
    return {
        keys.IMAGE: np.stack([o[keys.IMAGE] for o in picked]),  # [B,H,W,3] uint8
        keys.STATE: np.stack([o[keys.STATE] for o in picked]),  # [B,S]
        keys.INSTRUCTION: [o[keys.INSTRUCTION] for o in picked],
    }


@contextmanager
def recorded(policy: VLAPolicy):
    """Inside: every call of the policy's parts records its inputs or outputs in the dict."""
    seen: dict = {}
    handles = []

    def keep_out(name):
        return lambda module, args, out: seen.__setitem__(name, out)

    def keep_in(name):
        return lambda module, args, kwargs: seen.__setitem__(name, (args, kwargs))

    parts = {"text": policy.text_encoder, "image": policy.image_encoder}
    parts |= {"patchify": policy.image_encoder.patchify, "embed": policy.image_encoder.patch_embed}
    parts |= {f"source.{n}": s for n, s in policy.sources.items()}
    parts |= {"state": policy.state_encoder, "encoder": policy.encoder, "readout": policy.readout}
    for i, block in enumerate(policy.encoder.blocks):
        parts |= {f"block{i}": block}
        handles.append(block.attn.register_forward_pre_hook(keep_in(f"attn{i}"), with_kwargs=True))
    for name, module in parts.items():
        handles.append(module.register_forward_hook(keep_out(name)))
    for name, module in (("sequence", policy.encoder), ("image_in", policy.image_encoder)):
        handles.append(module.register_forward_pre_hook(keep_in(name), with_kwargs=True))
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def shape_tour(policy: VLAPolicy, obs: dict) -> Tour:
    """Runs `policy.encode` (eval mode) on batched observations and lists every stage."""
    with policy.inference():
        return _shape_tour(policy, obs)


def _shape_tour(policy: VLAPolicy, obs: dict) -> Tour:
    image, state, tokens, _ = prepare_observation(obs, policy.tokenizer, torch.device("cpu"))
    B, L = tokens.shape
    layout = policy.token_layout(L)
    T, D, H = policy.num_tokens(L), policy.d_model, policy.encoder.n_heads
    with recorded(policy) as seen:
        encoding = policy.encode(image, state, tokens, need_weights=True)
        chunk = policy.head.predict(encoding.features)  # [B,K,A] in [-1,1]
    sizes = dict(B=B, Hi=image.shape[1], Wi=image.shape[2], P=policy.image_encoder.patch_size)
    sizes |= dict(Np=policy.image_encoder.num_patches, S=state.shape[1], L=L, D=D, H=H)
    sizes |= {symbol(n): s.num_tokens for n, s in policy.sources.items()}
    sizes |= dict(Dh=D // H, T=T, R=policy.readout.num_readouts, K=policy.chunk_size)
    sizes |= dict(A=policy.action_dim)
    tour = Tour(sizes, layout, list(obs[keys.INSTRUCTION]))
    tour.add("image", "[B,Hi,Wi,3]", image, "uint8 pixels, as the env renders them")
    tour.add("state", "[B,S]", state, "effector x, y, vx, vy")
    tour.add("tokens", "[B,L]", tokens, f"word ids, PAD = 0: {tokens.tolist()}")
    words, pad_mask = seen["text"]
    tour.add("words", "[B,L,D]", words, "TextEncoder: embedding + position")
    tour.add("pad_mask", "[B,L]", pad_mask, f"True = PAD: {pad_mask.int().tolist()}")
    (_, _, instruction), _ = seen["image_in"]
    tour.add("instruction", "[B,D]", instruction, "mean over the real words")
    tour.add("patch_pixels", "[B,Np,P*P*3]", seen["patchify"], "patchify: Rearrange")
    tour.add("patch_embed", "[B,Np,D]", seen["embed"], "Linear(P*P*3 -> D)")
    film = "FiLM " + ("on" if policy.film is not None else "off")
    coords = "CoordConv " + ("on" if policy.image_encoder.coord_features else "off")
    tour.add("patches", "[B,Np,D]", seen["image"], f"{film}, {coords}, + 2-D position")
    for name in policy.sources:
        group = seen[f"source.{name}"]
        n = symbol(name)
        tour.add(
            name, f"[B,{n},D]", group.tokens, f"token source {type(policy.sources[name]).__name__}"
        )
        for out, value in group.outputs.items():
            rest = ["D" if d == D else str(d) for d in value.shape[2:]]
            tour.add(out, f"[{','.join(['B', n, *rest])}]", value, "its output")
    tour.add("state_token", "[B,1,D]", seen["state"], "StateEncoder")
    (x, mask), _ = seen["sequence"]
    tour.add("sequence", "[B,T,D]", x, "each group + its type embedding, concatenated")
    tour.add("key_padding_mask", "[B,T]", mask, "True only at PAD words")
    tour.pad_keys = [tuple(bt) for bt in mask.nonzero().tolist()]
    for i, block in enumerate(policy.encoder.blocks):
        (normed,), kwargs = seen[f"attn{i}"]  # the block's norm1(x) [B,T,D]
        attn = block.attn
        q = rearrange(attn.to_q(normed), "b t (h d) -> b h t d", h=H)  # [B,T,D] -> [B,H,T,Dh]
        k, v = rearrange(attn.to_kv(normed), "b t (two h d) -> two b h t d", two=2, h=H)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B,H,T,T]
        allowed = build_allowed_mask(T, T, kwargs["key_padding_mask"])  # [B,1,1,T]
        out, weights = scaled_dot_product(q, k, v, allowed)  # [B,H,T,Dh], [B,H,T,T]
        tour.weights_error = max(
            tour.weights_error, (weights - encoding.weights[i]).abs().max().item()
        )
        tour.pad_max.append(weights.masked_select(~allowed.expand_as(weights)).max().item())
        tour.add(f"layer{i}.norm1", "[B,T,D]", normed, "LayerNorm (pre-norm)")
        for name, t in (("q", q), ("k", k), ("v", v)):
            tour.add(
                f"layer{i}.{name}",
                "[B,H,T,Dh]",
                t,
                f"to_{'q' if name == 'q' else 'kv'}, heads split",
            )
        tour.add(f"layer{i}.scores", "[B,H,T,T]", scores, "q k^T / sqrt(Dh)")
        tour.add(f"layer{i}.weights", "[B,H,T,T]", weights, "PAD keys -inf, softmax over keys")
        tour.add(f"layer{i}.attended", "[B,H,T,Dh]", out, "weights @ v")
        tour.add(f"layer{i}.out", "[B,T,D]", seen[f"block{i}"][0], "x + attn(..), x + mlp(..)")
    encoded, _ = seen["encoder"]
    tour.add("encoded", "[B,T,D]", encoded, "final LayerNorm")
    features, cross = seen["readout"]
    if cross is not None:
        tour.add("readout.weights", "[B,H,R,T]", cross, "cross-attention of the queries")
    tour.add("readout", "[B,R,D]", features, "the readout queries' features")
    tour.add("features", "[B,R,D]", encoding.features, "after the sources' read")
    tour.add("head.predict", "[B,K,A]", chunk, f"{type(policy.head).__name__}, in [-1,1]")
    actions = policy.normalizer.unnormalize_action(chunk).clamp(-1, 1)  # as predict_chunk
    first = [[round(a, 2) for a in row] for row in actions[:, 0].tolist()]
    tour.add("actions", "[B,K,A]", actions, f"env units, first step: {first}")
    return tour


def symbol(source: str) -> str:
    """The size letter of a token source's group: Nk for keypoints, No for objects."""
    return f"N{source[0]}"


def format_tour(tour: Tour) -> str:
    """The printed tour: sizes, token layout, one line per stage, the checks."""
    lines = ["sizes " + " ".join(f"{k}={v}" for k, v in tour.sizes.items())]
    lines += [f"instruction {i}: {text!r}" for i, text in enumerate(tour.instructions)]
    lines.append("layout " + " | ".join(f"{n} {s.start}:{s.stop}" for n, s in tour.layout.items()))
    counts = " + ".join(f"{s.stop - s.start} {SAID.get(n, n)}" for n, s in tour.layout.items())
    lines.append(f"T = {counts} = {tour.sizes['T']}")
    lines += [f"  {s.name:<20} {s.dims:<14} {list(s.shape)!s:<18} {s.note}" for s in tour.stages]
    pads = ", ".join(f"sample {b} key {t}" for b, t in tour.pad_keys)
    for i, value in enumerate(tour.pad_max):
        lines.append(f"check layer{i} weights on PAD keys ({pads}): max {value:g}")
    lines.append(
        f"check recomputed weights vs encode(need_weights=True): max diff {tour.weights_error:.1e}"
    )
    return "\n".join(lines)


def tour(cfg: DictConfig) -> Tour:
    """The tour of `cfg.model` (untrained) or of `cfg.ckpt_path`'s policy, printed."""
    from vla.checkpoint import load_policy
    from vla.config import instantiate
    from vla.run_folder import resolve_ckpt_path

    env_kwargs = env_kwargs_of(cfg.env)
    if cfg.ckpt_path is None:
        torch.manual_seed(cfg.seed)
        policy = instantiate(cfg.model)
    else:
        policy, env_kwargs = load_policy(resolve_ckpt_path(cfg.ckpt_path))
    result = shape_tour(policy, real_batch(env_kwargs, cfg.tour.batch_size, cfg.tour.seed))
    print(format_tour(result))
    return result
