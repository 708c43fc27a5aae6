"""The scripts' error handling: the user's errors are one line and exit 2; a bug keeps its
traceback, on the console and in the run's log file."""

import logging

import pytest

from vla.cli import override_hints, run_cli
from vla.errors import CheckpointError, ConfigError, DatasetError, SeedRangeError, UserError


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
