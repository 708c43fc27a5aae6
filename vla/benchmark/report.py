"""The benchmark's goals, whether a run met them, and its printed table."""

from __future__ import annotations

import operator

# metric: (comparison, target); every other printed metric is reported without a goal
GOALS = {
    "lightning_vs_torch": (">=", 0.95),
    "mfu": (">=", 0.5),
    "data_wait_fraction": ("<=", 0.05),
    "rollout_speedup": (">=", 5.0),
    "latency_ms_p50": ("<=", 5.0),
}
UNGOALED = (
    "sdpa_vs_naive",
    "latency_ms_p99",
    "collect_steps_per_s",
    "samples_per_s_lightning",
    "samples_per_s_torch",
    "matmul_peak_gflops",
)
_COMPARE = {">=": operator.ge, "<=": operator.le}


def goals_met(r: dict) -> dict:
    """{metric: {"goal": ">= 0.95", "met": bool}} for each goal, judged on the reported value."""
    return {
        k: {"goal": f"{op} {target:g}", "met": bool(_COMPARE[op](r[k], target))}
        for k, (op, target) in GOALS.items()
    }


def format_results(r: dict) -> str:
    """The table of medians, spreads and goals (each goal `met` or `MISSED`), then scaling."""
    goals = r["goals"]
    lines = [
        f"{'metric':<24} {'value':>12}  {'min .. max over ' + str(r['repeats']):<26} "
        f"{'goal':<9} met"
    ]
    for k in [*GOALS, *UNGOALED]:
        low, high = r["spread"].get(k, (None, None))
        spread = f"{low:.3f} .. {high:.3f}" if low is not None else ""
        goal, met = "", ""
        if k in goals:
            goal, met = goals[k]["goal"], "met" if goals[k]["met"] else "MISSED"
        lines.append(f"{k:<24} {r[k]:>12.3f}  {spread:<26} {goal:<9} {met}".rstrip())
    if "beside" in r:  # bench.beside: another model's query, interleaved with this one's
        b = r["beside"]
        lines += [
            "",
            f"query latency, interleaved: model={b['model']} p50 {b['other_latency_ms_p50']:.1f} "
            f"ms (p99 {b['other_latency_ms_p99']:.1f}) against {b['latency_ms_p50']:.1f} ms "
            f"(p99 {b['latency_ms_p99']:.1f}): {b['other_vs_policy_latency']:.2f}x",
        ]
    lines += [
        "",
        f"{'image':>6} {'tokens':>7} {'us/sample':>10} {'GFLOP/sample':>13} "
        f"{'attn-score share':>17}",
    ]
    lines += [
        f"{s['image_size']:>6} {s['tokens']:>7} {s['us_per_sample']:>10.0f} "
        f"{s['gflop_per_sample']:>13.3f} {s['attention_score_share']:>17.1%}"
        for s in r["scaling"]
    ]
    return "\n".join(lines)
