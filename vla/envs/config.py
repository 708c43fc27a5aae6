"""Env configs as the code consumes them: plain keyword arguments, checked before any work."""

from __future__ import annotations

import numpy as np

from vla.envs import scene
from vla.envs.families import FAMILIES, SPLITS, Split, relation_words
from vla.envs.grammar import (
    COLOURS,
    MAX_CHAIN,
    PAIRS,
    RELATION_WORDS,
    VERBS,
    GrammarError,
    parse_relation_key,
)
from vla.errors import ConfigError

LIST_ARGS = (
    "families",
    "held_out_pairs",
    "held_out_verbs",
    "held_out_relations",
    "relation_words",
    "background",
)


def env_kwargs_of(env_cfg) -> dict:
    """Plain ReachEnv keyword arguments from an env config (drops Hydra's `_target_`; lists
    become plain Python lists, so they compare, hash and serialise as data)."""
    kwargs = {k: v for k, v in dict(env_cfg).items() if not k.startswith("_")}
    for key in LIST_ARGS:
        if kwargs.get(key) is not None:
            kwargs[key] = list(kwargs[key])
    return kwargs


def env_changes(env_cfg) -> dict:
    """The values an evaluation sets on top of a checkpoint's env (`conf/env/as_trained.yaml`:
    null means "as trained")."""
    return {k: v for k, v in env_kwargs_of(env_cfg).items() if v is not None}


def episode_values(env_kwargs: dict) -> dict:
    """The env values that decide what its episodes hold, sorted by name: render_* only affects
    people, and a null value is the env's default (so a key added with a null default keeps
    every existing dataset's key)."""
    return {
        k: v for k, v in sorted(env_kwargs.items()) if not k.startswith("render") and v is not None
    }


def check_env_args(a: dict, metadata: dict) -> None:
    """Refuses ReachEnv arguments that cannot work, with one message naming the key(s)."""
    max_targets = len(PAIRS) if a["shared_colours"] else len(COLOURS)
    modes = [None, *metadata["render_modes"]]
    checks = [
        (a["num_targets"] >= 1, "num_targets", ">= 1"),
        (
            a["num_targets"] <= max_targets,
            "num_targets",
            f"<= {max_targets} (distinct colour+shape pairs available with "
            f"shared_colours={a['shared_colours']})",
        ),
        (a["image_size"] >= 8, "image_size", ">= 8"),
        (a["render_size"] >= 8, "render_size", ">= 8"),
        (a["max_step"] > 0, "max_step", "> 0"),
        (a["success_radius"] > 0, "success_radius", "> 0"),
        (0 < a["target_size"] < 0.5, "target_size", "in (0, 0.5)"),
        (a["min_separation"] >= 0, "min_separation", ">= 0"),
        (a["max_episode_steps"] >= 1, "max_episode_steps", ">= 1"),
        (a["pixel_noise"] >= 0, "pixel_noise", ">= 0"),
        (
            len(a["background"]) == 3 and all(0 <= int(c) <= 255 for c in a["background"]),
            "background",
            "three values in [0, 255] (RGB)",
        ),
        (a["render_mode"] in modes, "render_mode", f"one of {modes}"),
        (a["split"] in SPLITS, "split", f"one of {list(SPLITS)}"),
        (
            2 <= a["chain_length"] <= MAX_CHAIN,
            "chain_length",
            f"between 2 and {MAX_CHAIN} (the longest chain the grammar has words for)",
        ),
    ]
    for ok, name, expected in checks:
        if not ok:
            raise ConfigError(f"env.{name}={a[name]!r} is invalid: expected {expected}")
    # targets are placed inside [margin, 1 - margin]; make sure they can be spread out
    usable = (1 - 2 * scene.centre_margin(a["target_size"])) ** 2
    if a["num_targets"] * np.pi * (a["min_separation"] / 2) ** 2 > 0.5 * usable:
        raise ConfigError(
            f"env.num_targets={a['num_targets']} with env.min_separation={a['min_separation']} "
            "does not fit in the arena: lower one of them"
        )
    check_families(a)
    check_held_out(a)
    check_relation_words(a)


def check_families(a: dict) -> None:
    families = list(a["families"])
    unknown = [f for f in families if f not in FAMILIES]
    if not families or unknown:
        raise ConfigError(
            f"env.families={families} has unknown entries {unknown}: expected a non-empty "
            f"list of {', '.join(FAMILIES)}"
        )
    if "relation" in families and a["num_targets"] < 2:
        raise ConfigError(
            f"env.families={families} has 'relation', which needs another shape to relate "
            f"to: env.num_targets={a['num_targets']} must be >= 2"
        )
    if "sequence" in families and a["chain_length"] > a["num_targets"]:
        raise ConfigError(
            f"env.chain_length={a['chain_length']} names more shapes than the scene has "
            f"(env.num_targets={a['num_targets']})"
        )
    if a["split"] == "novel_relations" and families != ["relation"]:
        raise ConfigError(
            f"env.split=novel_relations tests relations: env.families={families} must be [relation]"
        )


def check_held_out(a: dict) -> None:
    """The held-out sets must name real parts of the grammar, leave something to train on,
    and (for phrasings) be made of words that training phrasings still use."""
    pairs = [int(p) for p in a["held_out_pairs"]]
    if any(not 0 <= p < len(PAIRS) for p in pairs) or len(set(pairs)) >= len(PAIRS):
        raise ConfigError(
            f"env.held_out_pairs={pairs} is invalid: expected distinct indices in "
            f"[0, {len(PAIRS)}) that leave at least one pair to train on"
        )
    verbs = list(a["held_out_verbs"])
    training = [v for v in VERBS if v not in verbs]
    if any(v not in VERBS for v in verbs) or not training:
        raise ConfigError(
            f"env.held_out_verbs={verbs} is invalid: expected phrasings among {list(VERBS)} "
            "that leave at least one to train on"
        )
    unseen = sorted(
        {w for v in verbs for w in v.split()} - {w for v in training for w in v.split()}
    )
    if unseen:
        raise ConfigError(
            f"env.held_out_verbs={verbs} holds out every phrasing with the words {unseen}: a "
            "held-out phrasing must be made of words that training phrasings use"
        )
    for key in a["held_out_relations"]:
        try:
            parse_relation_key(key)
        except GrammarError:
            raise ConfigError(
                f"env.held_out_relations has {key!r}: expected 'relation:referent' (e.g. "
                "'left of:blue square') or 'superlative:kind' (e.g. 'leftmost:circle')"
            ) from None
    empty = {
        "novel_pairs": ("held_out_pairs", pairs),
        "novel_verbs": ("held_out_verbs", verbs),
        "novel_relations": ("held_out_relations", list(a["held_out_relations"])),
    }
    if a["split"] in empty and not empty[a["split"]][1]:
        key = empty[a["split"]][0]
        raise ConfigError(f"env.split={a['split']} tests env.{key}, which is empty")


def check_relation_words(a: dict) -> None:
    """`relation_words` must be words of the grammar, and leave the split's relation
    instructions at least one of them."""
    if a["relation_words"] is None:
        return
    words = list(a["relation_words"])
    unknown = [w for w in words if w not in RELATION_WORDS]
    if not words or unknown:
        raise ConfigError(
            f"env.relation_words={words} has unknown words {unknown}: expected a non-empty "
            f"list of {', '.join(RELATION_WORDS)} (null: every one)"
        )
    if "relation" not in a["families"]:
        return
    held = frozenset(a["held_out_relations"])
    if not relation_words(Split(a["split"], held_out_relations=held, relation_words=tuple(words))):
        usable = relation_words(Split(a["split"], held_out_relations=held))
        raise ConfigError(
            f"env.relation_words={words} leaves env.split={a['split']} no relation to ask: "
            f"its relations use {', '.join(usable)}"
        )
