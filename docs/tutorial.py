# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From attention to a trained VLA policy
#
# This notebook follows the lessons "attention as a shape chain" and "a Transformer encoder,
# then the VLA bridge" on this project's code: the one-query attention example, checked
# against `vla.models.attention`; the same chain inside the real policy on a real batch (the
# shape tour); a tiny policy trained by behaviour cloning; one of its rollouts, where it looks,
# and what it does without the instruction. It runs top to bottom on a 2-core CPU in about
# 2 minutes and downloads nothing (CI runs it: `tests/test_notebook.py`).
#
# `docs/tutorial.py` is this notebook as a script (jupytext percent format); edit either and
# run `jupytext --sync docs/tutorial.ipynb` to update the other.

# %%
# ruff: noqa: E402  (a notebook imports what each section needs where it first needs it)
import logging
import math
import os
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from hydra import compose, initialize_config_dir
from IPython.display import Image, display

import vla  # noqa: F401  (registers vla/Reach-v0)
from vla.config import CONF, instantiate

started = time.perf_counter()
# One thread: at these sizes a second buys little, and on cores that other work keeps busy
# two OpenMP threads stall each other, making a training step many times slower
# (tests/conftest.py).
torch.set_num_threads(1)
logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)  # training's lines
warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
if Path.cwd().name == "docs" and (Path.cwd().parent / "conf").is_dir():
    os.chdir(Path.cwd().parent)  # the checkout's root: demonstrations are cached in its data/


def config(name: str, overrides: list[str]):
    """A command's config, composed as `python scripts/<name>.py overrides...` would."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


# %% [markdown]
# ## 1. Attention, one query
#
# One query q [1,2] against three keys k [3,2] with values v [3,2]. The query matches keys 0
# and 2 equally (dot product 1) and key 1 not at all, so after the softmax keys 0 and 2 share
# most of the weight and the output is mostly their values.

# %%
q = torch.tensor([[1.0, 0.0]])  # [Tq=1, Dk=2]
k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [Tk=3, Dk=2]
v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])  # [Tk=3, Dv=2]

scores = q @ k.T / math.sqrt(k.shape[-1])  # [1,2] @ [2,3] -> [1,3]
weights = scores.softmax(dim=-1)  # [1,3], sums to 1
out = weights @ v  # [1,3] @ [3,2] -> [1,2]
print("scores ", scores.numpy().round(3))
print("weights", weights.numpy().round(3))
print("output ", out.numpy().round(3))

# %% [markdown]
# The policy computes every attention layer with `scaled_dot_product`: the same numbers.

# %%
from vla.models.attention import MultiHeadAttention, scaled_dot_product

out_lib, weights_lib = scaled_dot_product(q, k, v)
assert torch.allclose(weights_lib, weights) and torch.allclose(out_lib, out)
assert torch.allclose(weights, torch.tensor([[0.401, 0.198, 0.401]]), atol=5e-4)
assert torch.allclose(out, torch.tensor([[1.604, 0.797]]), atol=5e-4)

# %% [markdown]
# Now with the axes a real layer has: a batch, learned projections to Q, K and V, heads, and a
# padding mask. The second sequence's last token is PAD, so no query may attend to it: its
# column of the weights is exactly zero, and the fused kernel (SDPA) agrees with the
# written-out path.

# %%
torch.manual_seed(0)
B, T, D, H = 2, 5, 8, 2
x = torch.randn(B, T, D)  # [B,T,D]
pad = torch.tensor([[False] * 5, [False] * 4 + [True]])  # [B,T], True = PAD
mha = MultiHeadAttention(D, H, attn_impl="naive")
y, w = mha(x, key_padding_mask=pad, need_weights=True)  # [B,T,D], [B,H,T,T]
print("x", list(x.shape), "-> out", list(y.shape), "weights", list(w.shape))
print("weights on the PAD key:", w[1, :, :, 4].abs().max().item())
mha.attn_impl = "sdpa"
assert torch.allclose(mha(x, key_padding_mask=pad), y, atol=1e-6)
assert w[1, :, :, 4].abs().max() == 0 and torch.allclose(w.sum(-1), torch.ones(B, H, T))

# %% [markdown]
# ## 2. The shape tour: the same chain inside the policy
#
# `python scripts/tour.py` builds the policy of a config (the default `model=small`), takes a
# real batch of the env's observations and prints each stage: patches, keypoints, words,
# state, the sequence and its layout counted out to T, Q/K/V and scores per layer, the PAD
# columns of the weights, the readout and the head's output.

# %%
from vla.envs.config import env_kwargs_of
from vla.tour import format_tour, real_batch, shape_tour

tour_cfg = config("tour", [])
torch.manual_seed(0)
small = instantiate(tour_cfg.model)
batch = real_batch(env_kwargs_of(tour_cfg.env), batch_size=2, seed=tour_cfg.tour.seed)
lines = format_tour(shape_tour(small, batch)).splitlines()
print("\n".join(line for line in lines if not line.lstrip().startswith(("layer1", "layer2"))))

# %% [markdown]
# (Layers 1 and 2 are left out above; they repeat layer 0's shapes.) The 9 patches are the
# 48 px image cut into 3 x 3 patches of 16 px; the 8 keypoints are spatial-softmax tokens,
# (x, y) of where learned detectors fire, which give position as a number (the README's
# glossary says why); the words are as many as the batch's longest instruction.
#
# ## 3. Train a tiny policy
#
# `experiment=tiny_quick` is `model=tiny` (d_model 64, 2 layers, 0.24 M parameters) on the
# default recipe; it stops once 99 of 100 selection episodes succeed, then measures 200 test
# episodes. The demonstrations (3,000 expert episodes) are collected into `data/` first, in
# seconds, and reused after. This is `python scripts/train.py experiment=tiny_quick`.

# %%
import tempfile

from vla.training.train import train

for name in ("lightning", "lightning.pytorch"):  # its own notes (no GPU found, tips), not ours
    logging.getLogger(name).setLevel(logging.WARNING)
run = Path(tempfile.mkdtemp(prefix="tutorial-"))
train_cfg = config(
    "train",
    ["experiment=tiny_quick", f"paths.output_dir={run}", "logger=csv", "seed=2", "threads=1"],
)
metrics = train(train_cfg)
print(f"success {metrics['success_rate']:.1%} of {metrics['num_episodes']} test episodes")

# %%
curve = [c for c in metrics["curve"] if not c.get("final")]
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot([c["step"] for c in curve], [100 * c["success_rate"] for c in curve], "o-")
ax.set(xlabel="optimisation step", ylabel="selection success (%)", ylim=(0, 100))
ax.set_title("rollouts during training (100 episodes each)")
plt.show()

# %% [markdown]
# ## 4. A rollout, where the policy looks, and the language ablation
#
# `rollout` runs seeded test episodes in a vector env (one batched policy query per step);
# `record=1` keeps the frames of the first episode.

# %%
from vla.checkpoint import load_policy
from vla.eval.rollout import rollout
from vla.eval.video import annotate, gif_bytes

policy, env_kwargs = load_policy(run / "checkpoints" / "last.ckpt")
test_seed = train_cfg.seeds.test
shown = rollout(policy, env_kwargs, num_episodes=1, seed=test_seed, record=1)
frames = annotate(shown.frames[0], shown.instructions[0], bool(shown.success[0]))
display(Image(data=gif_bytes(frames), format="gif"))
print(shown.instructions[0], "->", "success" if shown.success[0] else "failure", shown.steps[0])

# %% [markdown]
# The readout token's attention at the first step, one row per encoder layer: over the image
# patches (brightness) and over the words (bars). `python scripts/visualize.py ckpt_path=<run>`
# draws the same picture; docs/learning-speed.md says how to read it.

# %%
import numpy as np

from vla.envs.reach import ReachEnv
from vla.eval.attention import episode_attention_figures

env = ReachEnv(**{**env_kwargs, "render_mode": "rgb_array"})
obs, _ = env.reset(seed=test_seed)
one = {key: np.asarray(value)[None] for key, value in obs.items() if key != "instruction"}
one["instruction"] = [obs["instruction"]]
(figure,) = episode_attention_figures(policy, one, [env.render()], ["step 0"])
env.close()
plt.figure(figsize=(9, 5))
plt.imshow(figure)
plt.axis("off")
plt.show()

# %% [markdown]
# Which inputs does it use? The same 100 test episodes, with the instruction replaced by
# "go to the" (it names nothing): a policy that reads the instruction falls to about one in
# three, the share of episodes where the shape it happens to reach is the named one.

# %%
n = 100
full = rollout(policy, env_kwargs, num_episodes=n, seed=test_seed)
blind = rollout(policy, env_kwargs, num_episodes=n, seed=test_seed, ablate=["language"])
for name, r in (("instruction", full), ('"go to the"', blind)):
    print(f"{name:<12} success {r.success.mean():.0%} of {n}")
assert full.success.mean() > blind.success.mean()
print(f"notebook ran in {time.perf_counter() - started:.0f} s")
