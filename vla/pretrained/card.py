"""The model card of a pretrained folder: its README.md, the page the Hub shows.

The YAML front matter is what the Hub indexes (library name, tags, the dataset, the licence);
the body gives what a reader checks before using a policy: how it was trained (the command,
seed, steps, wall time), how well it did (final success with its 95% Wilson interval and
episode count, the generalisation suite's table when one was run), and what goes in and
comes out, with shapes, plus the ten lines that run it.
"""

from __future__ import annotations

from vla.eval.stats import format_summary

LICENSE = "mit"  # the project's (pyproject.toml)
ABOUT = {
    "VLAPolicy": "A vision-language-action policy trained by behavior cloning with `vla`: it "
    "reads an image, the effector's state and an instruction, and predicts a chunk of actions.",
    "VLMPolicy": "A vision-language model in `vla`'s RT-2 recipe (docs/vlm.md): one prefix-LM "
    "Transformer that answers questions about an image and, once fine-tuned on demonstrations, "
    "writes actions as tokens of the same vocabulary.",
}
TAGS = ["robotics", "vision-language-action", "behavior-cloning", "vla", "safetensors"]


def model_card(config: dict, facts: dict) -> str:
    """README.md for a folder with `config` (its config.json) and the run's `facts`.

    Args:
        config: the folder's config.json content (`vla.pretrained.folder_config`).
        facts: what is known of the run, each optional: command (str), seed, steps,
            wall_s (seconds), success (`rate_summary`'s dict of the final evaluation),
            val_loss (runs without an env), dataset (the demonstration set's key),
            weights (which checkpoint's weights these are), suite (suite.json's `levels`).
    """
    dataset = facts.get("dataset")
    front = ["---", "library_name: vla", f"license: {LICENSE}", "pipeline_tag: robotics"]
    front += ["tags:", *(f"- {t}" for t in TAGS)]
    front += ["datasets:", f"- {dataset}"] if dataset else []
    front += ["---", ""]
    policy = config["policy_config"]
    _, name = policy_class(config)
    head = str((policy.get("head") or {}).get("_target_", name)).rsplit(".", 1)[-1]
    env_id = config.get("env_id")
    where = f"Trained in `{env_id}`." if env_id else "Trained offline, with no env to roll out in."
    body = [
        f"# vla policy: {head}, d_model {policy.get('d_model')}, depth {policy.get('depth')}",
        "",
        ABOUT.get(name, ABOUT["VLAPolicy"]) + f" {where}",
        "",
        "## Use",
        "",
        *usage(config),
        "",
        "## Training",
        "",
        *training(facts),
        "",
        "## Evaluation",
        "",
        *evaluation(facts),
        "",
        "## Inputs and outputs",
        "",
        *inputs_outputs(config),
        "",
    ]
    return "\n".join(front + body)


def policy_class(config: dict) -> tuple[str, str]:
    """(module, class) of the folder's policy, e.g. ("vla.models.policy", "VLAPolicy")."""
    target = config["policy_config"].get("_target_", "vla.models.policy.VLAPolicy")
    module, _, name = target.rpartition(".")
    return module, name


def usage(config: dict) -> list[str]:
    """The ten lines that run the policy in its env; a VLM is asked a question about the
    scene too, and one trained without an env (stage 1) only answers."""
    module, name = policy_class(config)
    env_config = config.get("env_config")
    make = 'gym.make("vla/Reach-v0", **policy.env_config)'
    if env_config is None and name == "VLMPolicy":  # a scene to ask about, of its image size
        make = f'gym.make("vla/Reach-v0", image_size={config["inputs"]["image"]["shape"][0]})'
    elif env_config is None:
        make = "gym.make(...)  # your env"
    act = [
        "policy.reset()",
        "done = False",
        "while not done:",
        "    obs, reward, terminated, truncated, info = env.step(policy.select_action(obs))",
        "    done = terminated or truncated",
    ]
    ask = 'image = torch.as_tensor(obs["image"])[None]  # [1,H,W,3]'
    ask = [ask, 'print(policy.answer(image, ["what colour is the circle"]))']
    return [
        "```python",
        "import gymnasium as gym",
        *(["import torch"] if name == "VLMPolicy" else []),
        "import vla  # registers vla/Reach-v0",
        f"from {module} import {name}",
        "",
        f'policy = {name}.from_pretrained("<this folder or Hub id>")',
        f"env = {make}",
        "obs, info = env.reset(seed=0)",
        *(ask if name == "VLMPolicy" else []),
        *(act if env_config is not None or name != "VLMPolicy" else []),
        "```",
    ]


def training(facts: dict) -> list[str]:
    """What is known of the run that trained it, one row each."""
    wall = facts.get("wall_s")
    rows = [
        ("command", facts.get("command") and f"`{facts['command']}`"),
        ("seed", facts.get("seed")),
        ("optimiser steps", facts.get("steps")),
        ("wall time", None if wall is None else f"{wall:.0f} s ({wall / 60:.1f} min)"),
        ("dataset", facts.get("dataset") and f"`{facts['dataset']}`"),
        ("weights", facts.get("weights")),
    ]
    rows = [(k, v) for k, v in rows if v is not None]
    if not rows:
        return ["Not recorded: this card was written from the policy alone."]
    return ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


def evaluation(facts: dict) -> list[str]:
    """The final success (or validation loss) and the suite's table."""
    success = facts.get("success")
    if success is not None and success.get("success_rate") is not None:
        lines = [
            f"Final success: **{format_summary(success)}** episodes (95% Wilson interval), "
            "on held-out test seeds of the training env."
        ]
    elif facts.get("val_loss") is not None:
        lines = [f"Not rolled out (no env); validation loss {facts['val_loss']:.4f}."]
    else:
        lines = ["Not evaluated."]
    suite = facts.get("suite")
    if suite:
        lines += [
            "",
            "Generalisation suite (`scripts/eval.py suite=levels`):",
            "",
            "| level | what it asks | success | 95% interval | episodes |",
            "|---|---|---|---|---|",
        ]
        for r in suite:
            low, high = r["ci95"]
            lines.append(
                f"| {r['level']} | {r['kind']} | {r['success_rate']:.1%} | "
                f"{100 * low:.1f}-{100 * high:.1f}% | {r['num_episodes']} |"
            )
    return lines


def inputs_outputs(config: dict) -> list[str]:
    """The observation `select_action` reads and the actions it returns, with shapes."""
    i, o = config["inputs"], config["outputs"]
    n, (k, a) = o["n_action_steps"], o["chunk"]["shape"]
    return [
        "| | dtype | shape | |",
        "|---|---|---|---|",
        f"| `image` (or `pixels`) | uint8 | {i['image']['shape']} | RGB, 0-255 |",
        f"| `state` (or `agent_pos`) | float32 | {i['state']['shape']} | position, velocity |",
        f"| `instruction` (or `task`) | str | | at most {i['instruction']['max_words']} words |",
        f"| action | float32 | {o['action']['shape']} | in [-1, 1], one per `select_action` |",
        f"| chunk | float32 | [{k}, {a}] | per query; {n} executed before the next |",
    ]
