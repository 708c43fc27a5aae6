"""play(cfg): the command behind `python scripts/play.py ckpt_path=RUN` and `vla-play`. Loads
the policy as evaluation does, builds the page and serves it on `play.host:play.port` until
Ctrl-C. Nothing leaves the machine: no share link, no analytics, fonts served locally."""

from __future__ import annotations

import ipaddress
import logging
import os

from omegaconf import DictConfig

from vla.checkpoint import load_policy
from vla.envs.config import env_changes
from vla.errors import ConfigError, UserError
from vla.play.episode import Scene
from vla.play.session import Playground
from vla.run_folder import resolve_ckpt_path
from vla.runtime import configure_torch

log = logging.getLogger(__name__)
NO_CALLS_HOME = {  # set before gradio is imported: it reads them then
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
}


def check_address(host: str, port: int) -> None:
    """Refuses a port outside 1..65535 and a host that is neither a name nor an address."""
    if not 1 <= int(port) <= 65535:
        raise ConfigError(f"play.port={port} must be in 1..65535")
    if not host or any(c.isspace() for c in str(host)):
        raise ConfigError(f"play.host={host!r} must be a host name or an IP address")
    try:
        if not ipaddress.ip_address(host).is_loopback:
            log.warning(f"play.host={host}: the page is reachable from other machines")
    except ValueError:  # a name such as localhost
        if host != "localhost":
            log.warning(f"play.host={host}: the page is reachable wherever that name resolves")


def import_gradio():
    for key, value in NO_CALLS_HOME.items():
        os.environ.setdefault(key, value)
    try:
        import gradio
    except ImportError:
        raise UserError('the playground needs gradio: pip install -e ".[play]"') from None
    return gradio


def play(cfg: DictConfig):
    """Serves the playground; returns when stopped (Ctrl-C), or at once with
    `play.block=false` (then the running page is returned, for tests)."""
    check_address(cfg.play.host, cfg.play.port)
    import_gradio()
    from vla.play.page import build_page

    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own start-up requests
    configure_torch(cfg.get("threads"))
    ckpt_path = resolve_ckpt_path(cfg.ckpt_path)
    policy, env_kwargs = load_policy(ckpt_path)
    if not env_kwargs:
        raise ConfigError(f"ckpt_path={str(ckpt_path)!r} was trained without an env to play in")
    env_kwargs.update(env_changes(cfg.env))
    playground = Playground(policy, env_kwargs, fps=cfg.play.fps)
    first = Scene(cfg.play.seed, env_kwargs["num_targets"], env_kwargs["shared_colours"],
                  env_kwargs["families"][0])  # fmt: skip
    next(iter(playground.run(first, "")))  # the first query pays torch's start-up, not a visitor
    page = build_page(playground, cfg.play.seed, title=str(ckpt_path))
    page.queue(default_concurrency_limit=1)  # one episode at a time (`vla.play.page`)
    log.info(f"playground at http://{cfg.play.host}:{cfg.play.port} (Ctrl-C stops it)")
    try:
        page.launch(
            server_name=cfg.play.host,
            server_port=int(cfg.play.port),
            share=False,
            inbrowser=cfg.play.open_browser,
            prevent_thread_lock=not cfg.play.block,
            footer_links=[],
            quiet=True,
            show_error=True,
        )
    except OSError as e:  # gradio's word for a port in use or an address it cannot bind
        raise ConfigError(
            f"play.host={cfg.play.host} play.port={cfg.play.port}: cannot listen there ({e})"
        ) from None
    return page
