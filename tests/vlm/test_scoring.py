"""Answers scored: exact words, pointing within the radius."""

import numpy as np

from vla.vlm.scoring import correct, per_family
from vla.vlm.vocab import VLMTokenizer


def test_pointing_is_right_within_the_radius_only():
    tok = VLMTokenizer(loc_bins=32)
    centre = np.array([0.5, 0.25])
    assert tok.point_of(tok.point_text(centre)) is not None
    assert correct("pointing", tok.point_text(centre), "", centre, tok)
    assert correct("pointing", tok.point_text([0.54, 0.25]), "", centre, tok)  # 0.04 + bin
    assert not correct("pointing", tok.point_text([0.6, 0.25]), "", centre, tok)  # 0.1 away
    assert not correct("pointing", "red circle", "", centre, tok)
    assert not correct("pointing", tok.point_text(centre) + " <loc_1>", "", centre, tok)


def test_words_must_match_exactly_and_rates_are_per_family():
    tok = VLMTokenizer()
    assert correct("caption", "blue square red circle", "blue square red circle", None, tok)
    assert not correct("caption", "red circle blue square", "blue square red circle", None, tok)
    assert not correct("count", "two", "three", None, tok)
    rates = per_family(["count", "count", "count", "spatial"], [True, True, False, False])
    assert rates["count"]["n"] == 3 and abs(rates["count"]["accuracy"] - 2 / 3) < 1e-9
    assert rates["spatial"]["accuracy"] == 0 and abs(rates["mean"]["accuracy"] - 1 / 3) < 1e-9
