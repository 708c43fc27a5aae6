"""Success rates with their uncertainty: the 95% Wilson score interval, and the exact McNemar
test for two policies run on the same episodes.

A success rate over n episodes is an estimate; with n = 200 and 95% success the true rate
could be anywhere from about 91% to 97%. The Wilson interval (Wilson 1927; Brown, Cai and
DasGupta 2001 recommend it over the normal approximation) stays inside [0, 1] and is honest
at 0% and 100%, where the normal approximation claims no uncertainty at all.

Two policies on the same episodes are paired: the episodes both solve (or both fail) say
nothing about which is better, only the discordant ones do. Under "equally good", each of
the b + c discordant episodes is equally likely to favour either, so b ~ Binomial(b + c, 1/2);
McNemar's exact test is that binomial's two-sided p-value. Two overlapping intervals can
hide a difference this test finds.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """(low, high) of the Wilson score interval for `successes` out of `n` (95% by default)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    low = 0.0 if successes == 0 else (centre - spread) / denominator
    high = 1.0 if successes == n else (centre + spread) / denominator
    return low, high


def rate_summary(successes: int, n: int) -> dict:
    """What every success rate carries: the rate, its episode count and its 95% interval."""
    low, high = wilson_interval(successes, n)
    return {"success_rate": successes / n, "num_episodes": n, "ci95": [low, high]}


def format_rate(rate: float, n: int, ci: tuple[float, float] | list[float] | None = None) -> str:
    """ "98.5% [95.7, 99.5] of 200"."""
    low, high = ci if ci is not None else wilson_interval(round(rate * n), n)
    return f"{rate:.1%} [{100 * low:.1f}, {100 * high:.1f}] of {n}"


def format_summary(m: dict) -> str:
    """`format_rate` of a dict with success_rate, num_episodes and ci95 (`rate_summary`'s)."""
    return format_rate(m["success_rate"], m["num_episodes"], m["ci95"])


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: `b` episodes only the first policy solved, `c` only
    the second; 2 * P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1 (1 when no
    episode is discordant)."""
    if b < 0 or c < 0:
        raise ValueError(f"need discordant counts >= 0, got b={b}, c={c}")
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)
