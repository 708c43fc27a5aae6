"""Wrong captions sorted by kind: one known caption of each kind, and the first kind that fits
where two could (their counts against a trained run's metrics.json are in test_train.py)."""

import pytest

from vla.vlm.caption_errors import kind, main, named_shapes

ANSWER = "red circle blue square green triangle"


@pytest.mark.parametrize(
    "predicted, expected",
    [
        (ANSWER, "right"),
        ("blue square red circle green triangle", "order"),
        ("red circle green triangle", "missing"),
        ("red circle blue square green triangle yellow circle", "extra"),
        ("red circle yellow square green triangle", "colour"),
        ("red square blue square green circle", "shape"),
        ("red square yellow square green triangle", "other"),  # a colour and a shape wrong
        ("red circle blue triangle", "other"),  # shorter, with a pair not in the scene
        ("red circle blue", "other"),  # a pair cut short
        ("", "missing"),
    ],
)
def test_each_wrong_caption_gets_the_first_kind_that_fits(predicted, expected):
    assert kind(predicted, ANSWER) == expected


def test_the_shapes_named_are_counted_where_the_colour_is_right_and_the_length_too():
    predicted = "red square yellow square green triangle"  # circle read as a square; a colour wrong
    assert named_shapes(predicted, ANSWER) == [("circle", "square"), ("triangle", "triangle")]
    assert named_shapes("red square blue square", ANSWER) == []  # a shape missing: no pairing


def test_a_folder_that_is_not_a_run_is_one_line_with_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert (
        capsys.readouterr().err == f"{tmp_path} is not a finished VLM run: it has no metrics.json\n"
    )
