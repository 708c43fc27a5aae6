"""The command's checks, before anything is loaded: where it listens, and what it needs."""

import logging
import socket
import sys
import urllib.request

import pytest

from tests.builders import run_script_here
from vla.errors import ConfigError, UserError
from vla.play.serve import check_address, import_gradio


def test_it_listens_on_this_machine_only_by_default(compose_cfg):
    cfg = compose_cfg("play", ["ckpt_path=RUN"])
    assert (cfg.play.host, cfg.play.port) == ("127.0.0.1", 7860)


@pytest.mark.parametrize(
    "host, warned", [("127.0.0.1", False), ("localhost", False), ("0.0.0.0", True)]
)
def test_a_host_other_machines_reach_is_said_so(host, warned, caplog):
    with caplog.at_level(logging.WARNING, logger="vla.play.serve"):
        check_address(host, 7860)
    assert ("reachable" in caplog.text) == warned


@pytest.mark.parametrize("host, port, key", [("127.0.0.1", 0, "play.port=0"),
                                             ("127.0.0.1", 65536, "play.port=65536"),
                                             ("local host", 7860, "play.host='local host'")])  # fmt: skip
def test_a_bad_address_is_refused_naming_the_key(host, port, key):
    with pytest.raises(ConfigError, match=key):
        check_address(host, port)


def test_the_command_refuses_a_bad_port_in_one_line(capsys):
    code, _, err = run_script_here("play.py", "ckpt_path=RUN", "play.port=70000", capsys=capsys)
    assert code == 2
    assert err.strip().splitlines() == ["error: play.port=70000 must be in 1..65535"]


def test_without_gradio_it_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # `import gradio` now fails
    with pytest.raises(UserError, match=r'pip install -e "\.\[play\]"'):
        import_gradio()


@pytest.mark.slow
def test_it_serves_the_page_and_refuses_a_port_in_use(compose_cfg, tiny_ckpt):
    pytest.importorskip("gradio", reason='needs gradio: pip install -e ".[play]"')
    from vla.play.serve import play

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        overrides = [f"ckpt_path={tiny_ckpt}", f"play.port={port}", "play.block=false"]
        with pytest.raises(ConfigError, match=f"play.port={port}: cannot listen there"):
            play(compose_cfg("play", overrides))
    page = play(compose_cfg("play", overrides))  # the port is free now
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            assert answer.status == 200 and b"vla playground" in answer.read()
    finally:
        page.close()
