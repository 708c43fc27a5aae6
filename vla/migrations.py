"""Older checkpoint formats in this one's layout: each step rewrites a policy config (and the
names of its weights) from one format to the next, so a checkpoint of any format from 2 on
loads. An option that was removed cannot be migrated: the error names the commit whose code
still has it."""

from __future__ import annotations

import copy

from vla.errors import CheckpointError
from vla.models.policy import SHARED_SIZES

REMOVED_AT = "71b5b1e"  # the last commit with model/referents, model/relations and the rest
SOURCES = ("keypoints", "objects")  # the token sources of format 3, top-level parts then


def format2_to_3(config: dict, path) -> dict:
    """A format-2 policy config in format 3: the sizes every part repeated move up to the
    policy, each part becomes a partial, the normaliser follows state_dim/action_dim, and
    pixels are scaled one way for every part (the weights' names are unchanged).

    Raises CheckpointError for a format-2 config format 3 cannot express (parts that
    disagreed about a shared value, pixel statistics other than 0.5)."""
    old = copy.deepcopy(config)

    def refuse(what: str):
        raise CheckpointError(
            f"ckpt_path={str(path)!r} (checkpoint format 2) has {what}, which checkpoint "
            "format 3 cannot express"
        )

    image, encoder, normalizer = old["image_encoder"], old["encoder"], old.pop("normalizer")
    for key in ("mean", "std"):  # every part now scales pixels [0,255] -> [-1,1]
        if [float(v) for v in image.pop(key, [0.5] * 3)] != [0.5] * 3:
            refuse(f"image_encoder.{key} other than 0.5")
    image.pop("channels", None)
    if normalizer.get("eps", 1e-6) != 1e-6:
        refuse(f"normalizer.eps={normalizer['eps']}")
    new = dict(_target_=old.pop("_target_"), d_model=old.pop("d_model"))
    new |= {k: encoder[k] for k in ("n_heads", "depth", "mlp_ratio", "dropout", "attn_impl")}
    new |= dict(pos_emb=image["pos_emb"], max_words=old["tokenizer"].pop("max_len"))
    new |= dict(num_readouts=old["readout"]["num_readouts"], chunk_size=old["head"]["chunk_size"])
    new |= dict(n_action_steps=old.pop("n_action_steps"), image_size=image["image_size"])
    new |= dict(state_dim=normalizer["state_dim"], action_dim=normalizer["action_dim"])
    text = old["text_encoder"]
    if text.pop("max_len") != new["max_words"]:
        refuse("text_encoder.max_len other than tokenizer.max_len")
    text.pop("vocab_size")  # the policy checked it equal to the tokenizer's
    encoder.pop("depth")
    for later in ("referents", "relations"):  # parts most format-2 configs predate
        old.setdefault(later, None)
    if old["referents"]:  # its detector's width is the keypoints' now, given by the policy
        old["referents"].pop("hidden", None)
    for name, part in old.items():
        if part is None:
            new[name] = None
            continue
        for key in sorted(set(part) & set(SHARED_SIZES)):
            if part.pop(key) != new[key]:
                refuse(f"{name}.{key} other than the policy's {key}={new[key]!r}")
        new[name] = {"_target_": part.pop("_target_"), "_partial_": True} | part
    return new


def format3_to_4(config: dict, path) -> dict:
    """A format-3 policy config in format 4: the pointer becomes `objects.pointer`, FiLM's
    class lives in `vla.models.image_encoder`, and the switches of removed options go.

    Raises CheckpointError for a config that uses a removed option."""
    new = copy.deepcopy(config)

    def removed(what: str):
        raise CheckpointError(
            f"ckpt_path={str(path)!r} uses {what}, which was removed from the code: "
            f"`git checkout {REMOVED_AT}` has it"
        )

    for name in ("referents", "relations"):
        if new.pop(name, None) is not None:
            removed(f"model/{name}")
    for part, key in (("encoder", "film"), ("readout", "instruction_query")):
        if new.get(part, {}).pop(key, False):
            removed(f"model.{part}.{key}=true")
    pointer = new.pop("pointer", None)
    if new.get("objects") is not None:
        new["objects"]["pointer"] = pointer is not None
    if (new.get("film") or {}).get("_target_") == "vla.models.film.FiLM":
        new["film"]["_target_"] = "vla.models.image_encoder.FiLM"
    return new


# format 5 holds the default's parts in files along the data flow
MOVED_IN_5 = {
    "vla.models.tokenizer.Tokenizer": "vla.models.language.Tokenizer",
    "vla.models.text_encoder.TextEncoder": "vla.models.language.TextEncoder",
    "vla.models.image_encoder.ImageEncoder": "vla.models.vision.ImageEncoder",
    "vla.models.image_encoder.FiLM": "vla.models.vision.FiLM",
    "vla.models.keypoints.KeypointEncoder": "vla.models.vision.KeypointEncoder",
    "vla.models.state_encoder.StateEncoder": "vla.models.state.StateEncoder",
    "vla.models.readout.Readout": "vla.models.transformer.Readout",
}


def format4_to_5(config):
    """A format-4 config (a policy's or a VLM's) in format 5: the classes that moved files
    are named where they live now; nothing else changes, the weights' names neither."""
    if isinstance(config, dict):
        new = {k: format4_to_5(v) for k, v in config.items()}
        if new.get("_target_") in MOVED_IN_5:
            new["_target_"] = MOVED_IN_5[new["_target_"]]
        return new
    if isinstance(config, list):
        return [format4_to_5(v) for v in config]
    return config


def rename_weights(state: dict, version: int) -> dict:
    """A Lightning state_dict of format `version` with this format's names: the token sources
    under `policy.sources.`, the pointer inside the object tokens, the object probes inside
    the recipe's object losses."""
    if version >= 4:
        return state
    renames = {f"policy.{s}.": f"policy.sources.{s}." for s in SOURCES}
    renames |= {"policy.pointer.": "policy.sources.objects."}
    renames |= {f"{p}_probe.": f"object_losses.{p}_probe." for p in ("colour", "shape")}
    out = {}
    for key, value in state.items():
        old = next((o for o in renames if key.startswith(o)), None)
        out[key if old is None else renames[old] + key[len(old) :]] = value
    return out
