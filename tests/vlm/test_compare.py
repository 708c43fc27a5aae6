"""Stage-2 starts paired on the same episodes."""

import pytest

from vla.errors import ConfigError
from vla.vlm.compare import paired


def episodes(successes):
    return [dict(seed=1_000_000_000 + i, success=s) for i, s in enumerate(successes)]


def test_discordant_counts_and_the_exact_mcnemar_p():
    a = episodes([True, True, True, False, True, False])
    b = episodes([False, False, False, True, True, False])
    assert paired(a, b) == (3, 1, pytest.approx(0.625))  # 2 * P(X <= 1), X ~ Bin(4, 1/2)
    with pytest.raises(ConfigError, match="different episodes"):
        paired(a, episodes([True] * 5))
