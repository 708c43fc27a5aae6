"""Pretrained folders on the Hugging Face Hub, through `huggingface_hub` (the optional extra
`pip install 'vla[hub]'`), in the same layout as on disk.

    VLAPolicy.from_pretrained("user/vla-reach")    # downloads config.json, model.safetensors
                                                   # and README.md only, then reads them
    python scripts/export.py format=pretrained ckpt_path=<run> out=<folder> push_to_hub=user/vla-reach

A source is a Hub id only where no such local path exists and it reads `owner/name`, so a
local folder always wins and a typo in a local path says both places it looked.
"""

from __future__ import annotations

import re
from pathlib import Path

from vla.errors import CheckpointError

HUB_FILES = ["config.json", "model.safetensors", "README.md"]  # nothing else is downloaded
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
CHECKPOINT_SUFFIXES = (".ckpt", ".pt", ".pth")


def is_hub_id(source) -> bool:
    """Whether `source` names a Hub repository: `owner/name`, and no such path here."""
    text = str(source)
    return (
        bool(HUB_ID.fullmatch(text))
        and not Path(text).exists()
        and not text.endswith(CHECKPOINT_SUFFIXES)
    )


def is_pretrained_source(source) -> bool:
    """Whether `source` means a pretrained folder (a local folder with config.json, or a Hub
    id) rather than a Lightning checkpoint file."""
    return (Path(source) / "config.json").is_file() or is_hub_id(source)


def local_folder(source, revision: str | None = None) -> Path:
    """The local folder `source` names: itself, or the Hub snapshot of the id it names
    (downloaded into huggingface_hub's cache, the three files of the layout only)."""
    if not is_hub_id(source):
        return Path(source).expanduser()
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise CheckpointError(
            f"{str(source)!r} is not a folder here, and reading it as a Hub id needs "
            "huggingface_hub: pip install 'vla[hub]'"
        ) from None
    try:
        folder = snapshot_download(str(source), revision=revision, allow_patterns=HUB_FILES)
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{str(source)!r} is neither a folder here nor a model the Hub gave: {first}"
        ) from None
    return Path(folder)


def push_folder(folder, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Uploads a pretrained folder to the Hub model repository `repo_id` (created if needed),
    after reading it back as every user will; returns the repository's URL."""
    from vla.pretrained.folder import read_pretrained

    folder = Path(folder)
    read_pretrained(folder)  # a folder that does not load is never published
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise CheckpointError("push_to_hub needs huggingface_hub: pip install 'vla[hub]'") from None
    api = HfApi(token=token)
    url = api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    api.upload_folder(
        repo_id=repo_id,
        repo_type="model",
        folder_path=str(folder),
        allow_patterns=HUB_FILES,
        commit_message=f"Upload a vla policy ({folder.name})",
    )
    return str(url)
