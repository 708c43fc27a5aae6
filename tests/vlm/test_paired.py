"""`python -m vla.vlm.paired` refuses what it cannot pair with one message naming the folder
(its numbers are checked against a trained run's metrics.json in test_train.py)."""

import json

import pytest

from vla.errors import ConfigError
from vla.vlm.paired import compare, main


def test_a_folder_that_is_not_a_finished_vlm_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=f"{tmp_path} is not a finished VLM run"):
        compare(tmp_path, tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"success_rate": 0.5}))  # a policy's run
    with pytest.raises(ConfigError, match="has no eval_corpus"):
        compare(tmp_path, tmp_path)


def test_the_command_line_prints_a_bad_folder_as_one_line_with_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path), str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err == f"{tmp_path} is not a finished VLM run: it has no metrics.json\n"
