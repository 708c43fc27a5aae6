import pytest

from vla.eval.stats import format_rate, mcnemar_exact, rate_summary, wilson_interval


@pytest.mark.parametrize(
    "successes, n, low, high",
    [  # Wilson score intervals at 95% (z = 1.96), as published tables give them
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
        (190, 200, 0.9104, 0.9726),
        (1, 100, 0.0018, 0.0545),
    ],
)
def test_wilson_interval_known_values(successes, n, low, high):
    lo, hi = wilson_interval(successes, n)
    assert lo == pytest.approx(low, abs=5e-5) and hi == pytest.approx(high, abs=5e-5)


def test_interval_narrows_with_more_episodes_and_holds_the_rate():
    small, large = wilson_interval(45, 50), wilson_interval(900, 1000)
    assert small[0] < large[0] <= 0.9 <= large[1] < small[1]
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(11, 10)


def test_every_rate_carries_its_episodes_and_interval():
    assert rate_summary(190, 200) == {
        "success_rate": 0.95,
        "num_episodes": 200,
        "ci95": list(wilson_interval(190, 200)),
    }
    assert format_rate(0.95, 200) == "95.0% [91.0, 97.3] of 200"


@pytest.mark.parametrize(
    "b, c, p",
    [  # exact two-sided McNemar p-values: 2 * P(Binomial(b + c, 1/2) <= min(b, c))
        (1, 8, 0.0390625),  # 2 * (1 + 9) / 512
        (8, 1, 0.0390625),  # symmetric
        (0, 5, 0.0625),  # 2 / 32
        (2, 10, 0.0385742),  # 2 * (1 + 12 + 66) / 4096
        (5, 5, 1.0),  # capped at 1
        (0, 0, 1.0),  # no discordant pair: no evidence either way
        (10, 30, 0.0022214),  # scipy.stats.binomtest(10, 40).pvalue
    ],
)
def test_mcnemar_exact_known_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=5e-7)


def test_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 3)
