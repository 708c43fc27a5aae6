"""Env configs as the code consumes them."""

from __future__ import annotations


def env_kwargs_of(env_cfg) -> dict:
    """Plain ReachEnv keyword arguments from an env config (drops Hydra's `_target_`)."""
    kwargs = {k: v for k, v in dict(env_cfg).items() if not k.startswith("_")}
    if kwargs.get("instructed_pairs") is not None:
        kwargs["instructed_pairs"] = [int(p) for p in kwargs["instructed_pairs"]]
    return kwargs
