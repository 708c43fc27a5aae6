"""Relation answers by word: the questions the corpus would ask, and the paired table."""

import json

import numpy as np
import pytest

from vla.vlm.corpus import CorpusConfig
from vla.vlm.relation_words import main, questions, table


def test_two_shapes_ask_every_word_and_nearest_is_the_other_shape():
    data = questions(CorpusConfig(num_targets=(2,), shared_colours=0.0), num_scenes=20, seed=7)
    assert set(data["shapes"].tolist()) == {2}
    for q, a, w in zip(data["question"], data["answer"], data["word"], strict=True):
        assert w in q
        if w == "nearest":  # the one shape other than the reference
            assert a != q.removeprefix("what is the shape nearest the ")
    assert data["word"].count("nearest") == 20  # always clear with one other shape
    again = questions(CorpusConfig(num_targets=(2,), shared_colours=0.0), 20, 7)
    assert again["question"] == data["question"]  # the seed fixes the questions


def test_the_table_pairs_two_runs_on_the_same_questions():
    data = dict(word=["nearest"] * 4 + ["above"] * 2, shapes=np.array([3, 3, 4, 4, 3, 3]))
    a = np.array([1, 1, 0, 0, 1, 1], bool)
    b = np.array([0, 0, 0, 0, 1, 1], bool)
    rows = table(data, {"A": a, "B": b}).splitlines()
    assert rows[0] == "word, shapes: A | B | only A / only B, p"
    assert rows[1].startswith("above, all: 100.0%") and rows[1].endswith("0 / 0, p = 1")
    nearest_3 = next(r for r in rows if r.startswith("nearest, 3:"))
    assert nearest_3.startswith("nearest, 3: 100.0%") and nearest_3.endswith("2 / 0, p = 0.5")


def test_a_folder_that_is_not_a_vlm_run_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"{tmp_path} is not a finished VLM run: no metrics.json with eval_corpus\n"
    )


def test_a_run_of_a_corpus_option_this_version_has_not_is_one_line(tmp_path, capsys):
    from dataclasses import asdict

    held_out = asdict(CorpusConfig(num_scenes=10)) | {"relation_words": None}  # an older run's
    (tmp_path / "metrics.json").write_text(json.dumps({"eval_corpus": held_out}))
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"{tmp_path}: corpus keys ['relation_words'] are not options of this version's corpus\n"
    )
