"""The scripts' error handling: the user's errors are one line and exit 2; a bug keeps its
traceback, on the console and in the run's log file."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from tests.builders import run_script_here
from vla.cli import check_override_types, override_hints, run_cli
from vla.errors import CheckpointError, ConfigError, DatasetError, SeedRangeError, UserError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def log_file(tmp_path):
    """A file handler on the root logger, as Hydra installs one for <run>/<task>.log."""
    path = tmp_path / "train.log"
    handler = logging.FileHandler(path)
    logging.getLogger().addHandler(handler)
    yield path
    logging.getLogger().removeHandler(handler)
    handler.close()


def _fail(error):
    def fn(cfg):
        raise error

    return fn


def test_the_users_error_is_one_line_exit_2_and_kept_in_the_log(log_file, capsys):
    with pytest.raises(SystemExit) as info:
        run_cli(_fail(ConfigError("model.d_model=0 must be >= 1")), cfg=None)
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: model.d_model=0 must be >= 1\n"
    assert log_file.read_text() == "error: model.d_model=0 must be >= 1\n"


def test_ctrl_c_outside_training_is_one_line_and_status_130(log_file, capsys):
    with pytest.raises(SystemExit) as info:
        run_cli(_fail(KeyboardInterrupt()), cfg=None)  # e.g. while collecting demonstrations
    assert info.value.code == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C)\n"
    assert log_file.read_text() == "interrupted (Ctrl-C)\n"


def test_a_bug_keeps_its_traceback_in_the_log_and_is_not_blamed_on_the_user(log_file, capsys):
    def buggy(cfg):
        return [][1]  # an IndexError deep inside the code

    with pytest.raises(IndexError):
        run_cli(buggy, cfg=None)
    with pytest.raises(ValueError, match="chunks have shape"):  # an internal invariant
        run_cli(_fail(ValueError("chunks have shape (2, 4, 2), expected (2, 1, 2)")), cfg=None)
    assert "error:" not in capsys.readouterr().err
    log = log_file.read_text()
    assert log.count("Traceback (most recent call last)") == 2
    assert "return [][1]" in log and "IndexError: list index out of range" in log
    assert "ValueError: chunks have shape (2, 4, 2)" in log


def test_every_user_error_type_is_one_and_none_is_a_value_error():
    for kind in (ConfigError, SeedRangeError, CheckpointError, DatasetError):
        assert issubclass(kind, UserError)
    assert not issubclass(UserError, ValueError)


def test_hints_name_the_group_and_the_choice_a_key_belongs_to():
    assert override_hints("train", ["model/heads=flow"]) == [
        "did you mean model/head? (model/heads is not a key of the config)"
    ]
    assert override_hints("train", ["model.head.flow_steps=20"]) == [
        "model.head.flow_steps is a key of model/head=flow: add model/head=flow to the command"
    ]
    assert override_hints("train", ["model/head=flow", "model.head.flow_steps=20"]) == []
    assert override_hints("train", ["model/head=flow", "model.head.flow_step=20"]) == [
        "did you mean model.head.flow_steps? (model.head.flow_step is not a key of the config)"
    ]


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "trainer.max_epochs=abc",
            "trainer.max_epochs='abc' must be an integer (the default is 2)",
        ),
        ("env.num_targets=abc", "env.num_targets='abc' must be an integer (the default is 3)"),
        ("env.shared_colours=yes", "env.shared_colours='yes' must be true or false"),
        ("optimizer.lr=fast", "optimizer.lr='fast' must be a number"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_config_error(override, message):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", ["model=tiny", override], return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        try:
            with pytest.raises(ConfigError, match=re.escape(message)):
                check_override_types(cfg)
            fine = compose("train", ["model=tiny", "optimizer.lr=1"], return_hydra_config=True)
            HydraConfig.instance().set_config(fine)
            check_override_types(fine)  # an integer where a float is the default is a number
        finally:
            HydraConfig.instance().cfg = None


def test_a_bad_type_on_the_command_line_is_one_line_and_leaves_no_folder(tmp_path, capsys):
    for override, line in [
        (
            "trainer.max_epochs=abc",
            "trainer.max_epochs='abc' must be an integer (the default is 2)",
        ),
        ("env.num_targets=abc", "env.num_targets='abc' must be an integer (the default is 3)"),
    ]:
        code, _, err = run_script_here(
            "train.py", override, f"hydra.run.dir={tmp_path}/run", capsys=capsys
        )
        assert code == 2, err
        assert err.strip().splitlines() == [f"error: {line}"]
        assert not (tmp_path / "run").exists()


def test_help_is_a_short_header_not_the_config(capsys):
    for script, first in [
        ("train.py", "python scripts/train.py"),
        ("eval.py", "python scripts/eval.py"),
    ]:
        code, out, err = run_script_here(script, "--help", capsys=capsys)
        assert code == 0 and out.startswith(first), err
        assert len(out.splitlines()) < 45 and "_target_" not in out
        assert "README.md" in out and "model/head: " in out


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["trainer.max_epochs=abc", "hydra.run.dir=RUN"]])
def test_help_and_a_bad_value_import_neither_torch_nor_lightning(args, tmp_path):
    """A script imports its work only after the command line's checks: --help and a value of
    the wrong type answer without the ~7 s of imports."""
    argv = ["scripts/train.py", *(a.replace("RUN", str(tmp_path / "run")) for a in args)]
    code = (
        "import runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    runpy.run_path('scripts/train.py', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted({'torch', 'lightning'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr
