"""report.png (matplotlib, Agg) and a self-contained report.html; the headline table as text.

Timeline frames are the pandas DataFrames of timeline.parquet (typed Any: pandas ships no types).
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from loadtest.aggregate import PERCENTILE_NAMES
from loadtest.scenario import CONSUMED_OP, RECONCILIATION_OP, REQUEST_OPS

# Rows are shown for the operations a run has: classic members never send the consumer_group_*
# requests (nor Metadata), KIP-848 members never the classic ones.
HEADLINE_OPS = (
    "join",
    "find_coordinator",
    "metadata",
    "join_group",
    "sync_group",
    "consumer_group_join",
    "heartbeat",
    "consumer_group_heartbeat",
    "offset_commit",
    "offset_fetch",
    "leave_group",
    "consumer_group_leave",
    "produce",
    "fetch",
)
_STEADY_OPS = ("heartbeat", "offset_commit")
_CONSUMER_STEADY_OPS = ("consumer_group_heartbeat", "offset_commit")


def is_consumer(summary: dict[str, Any]) -> bool:
    return "reconciliation" in summary


def _steady_ops(summary: dict[str, Any]) -> tuple[str, str]:
    return _CONSUMER_STEADY_OPS if is_consumer(summary) else _STEADY_OPS


_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _op_stats(summary: dict[str, Any], op: str) -> dict[str, Any]:
    if op == "join":
        return summary.get("join") or {}
    return summary["operations"].get(op) or {}


def headline_rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    for op in HEADLINE_OPS:
        s = _op_stats(summary, op)
        if not s:
            continue
        rows.append(
            [
                op,
                _fmt(s["count"]),
                _fmt(s["rate_per_s"]),
                _fmt(s["errors"]),
                *(_fmt(s.get(name), 2) for name in PERCENTILE_NAMES),
                _fmt(s.get("max"), 1),
            ]
        )
    return rows


HEADLINE_HEADER = [
    "op",
    "count",
    "rate/s",
    "non-zero codes",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
]


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[list[str]]:
    rows = []
    for op in HEADLINE_OPS:
        sa, sb = _op_stats(a, op), _op_stats(b, op)
        if not sa or not sb:
            continue
        row = [op, _fmt(sa["rate_per_s"]), _fmt(sb["rate_per_s"])]
        for name in ("p50", "p99", "p99_9"):
            row += [_fmt(sa.get(name), 2), _fmt(sb.get(name), 2), _ratio(sb.get(name), sa.get(name))]
        rows.append(row)
    ra, rb = a["rebalances"]["duration_ms"], b["rebalances"]["duration_ms"]
    rows.append(
        [
            "reconciliation (per group epoch)" if is_consumer(a) else "rebalance (per generation)",
            _fmt(a["rebalances"]["generations"]),
            _fmt(b["rebalances"]["generations"]),
            _fmt(ra.get("p50"), 1),
            _fmt(rb.get("p50"), 1),
            _ratio(rb.get("p50"), ra.get("p50")),
            _fmt(ra.get("p99"), 1),
            _fmt(rb.get("p99"), 1),
            _ratio(rb.get("p99"), ra.get("p99")),
            _fmt(ra.get("p99_9"), 1),
            _fmt(rb.get("p99_9"), 1),
            _ratio(rb.get("p99_9"), ra.get("p99_9")),
        ]
    )
    return rows


def compare_header(label_a: str, label_b: str) -> list[str]:
    header = ["op", f"rate/s {label_a}", f"rate/s {label_b}"]
    for name in ("p50", "p99", "p99.9"):
        header += [f"{name} {label_a}", f"{name} {label_b}", f"{name} {label_b}/{label_a}"]
    return header


def ratios(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """b / a for rates and percentiles of every operation both have."""
    out: dict[str, Any] = {}
    for op in HEADLINE_OPS:
        sa, sb = _op_stats(a, op), _op_stats(b, op)
        if sa and sb:
            out[op] = {
                key: _ratio_value(sb.get(key), sa.get(key))
                for key in ("rate_per_s", *PERCENTILE_NAMES, "max")
            }
    out["rebalance_duration"] = {
        key: _ratio_value(b["rebalances"]["duration_ms"].get(key), a["rebalances"]["duration_ms"].get(key))
        for key in (*PERCENTILE_NAMES, "max")
    }
    return out


def _ratio_value(num: Any, den: Any) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return round(float(num) / float(den), 3)


def _ratio(num: Any, den: Any) -> str:
    value = _ratio_value(num, den)
    return "-" if value is None else f"{value:.2f}x"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# the picture


def plot(targets: list[tuple[dict[str, Any], Any]], path: Path) -> None:
    consumer = is_consumer(targets[0][0])
    pipeline = all("pipeline" in s for s, _ in targets)
    rows = (4 if consumer else 3) + (1 if pipeline else 0)
    fig, axes = plt.subplots(rows, 2, figsize=(15, 4.8 * rows))
    last = axes[3 if consumer else 2]
    _percentile_bars(axes[0][0], [s for s, _ in targets])
    for index, (summary, frame) in enumerate(targets):
        color = _COLORS[index % len(_COLORS)]
        label = summary["target"]
        steady = _steady_ops(summary)
        _throughput(axes[0][1], frame, label, color, steady)
        _p99(axes[1][0], frame, label, color, steady)
        _errors(axes[1][1], frame, label, color)
        if consumer:
            _reconciliation(axes[2][0], summary, label, color)
            _epochs(axes[2][1], frame, label, color)
        _latency_per_op(last[0], frame, label, len(targets) > 1)
    _group_lanes(last[1], [s for s, _ in targets])
    if pipeline:
        for index, (summary, frame) in enumerate(targets):
            color = _COLORS[index % len(_COLORS)]
            _end_to_end(axes[-1][0], frame, summary["target"], color)
            _lag(axes[-1][1], summary, color)
        axes[-1][0].set_title("end-to-end latency per second of production (p50 solid, p99 dashed)")
        axes[-1][0].set_xlabel("seconds since start")
        axes[-1][0].set_ylabel("ms")
        axes[-1][0].set_yscale("log")
        axes[-1][1].set_title(
            "consumer lag: records acknowledged, not yet consumed (max group solid, all dashed)"
        )
        axes[-1][1].set_xlabel("seconds since start")
        axes[-1][1].set_ylabel("records")
        for ax in axes[-1]:
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
    axes[0][1].set_title("throughput (requests started per second)")
    axes[0][1].set_xlabel("seconds since start")
    axes[0][1].set_ylabel("requests/s")
    heartbeat = "consumer_group_heartbeat" if consumer else "heartbeat"
    axes[1][0].set_title(f"p99 latency per second ({heartbeat} solid, offset_commit dashed)")
    axes[1][0].set_xlabel("seconds since start")
    axes[1][0].set_ylabel("ms")
    axes[1][0].set_yscale("log")
    axes[1][1].set_title("non-zero codes per second (signals solid, unexpected dashed), loop lag dotted")
    axes[1][1].set_xlabel("seconds since start")
    axes[1][1].set_ylabel("responses/s")
    panels = [axes[0][1], axes[1][0], axes[1][1]]
    if consumer:
        axes[2][0].set_title("reconciliation time per group epoch (by epoch start)")
        axes[2][0].set_xlabel("seconds since start")
        axes[2][0].set_ylabel("ms")
        axes[2][0].set_yscale("log")
        axes[2][1].set_title(
            "group epochs per second: reconciled solid, superseded dashed; double ownership dotted"
        )
        axes[2][1].set_xlabel("seconds since start")
        axes[2][1].set_ylabel("epochs/s")
        panels += [axes[2][0], axes[2][1]]
    last[0].set_title(
        "p99 latency per second of every operation" + (" (second target dashed)" if len(targets) > 1 else "")
    )
    last[0].set_xlabel("seconds since start")
    last[0].set_ylabel("ms")
    last[0].set_yscale("log")
    noun = "group epoch reconciliation" if consumer else "rebalance"
    last[1].set_title(f"{noun} timeline per group (a bar per generation: start to done)")
    last[1].set_xlabel("seconds since start")
    panels.append(last[0])
    for ax in panels:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    names = " vs ".join(s["target"] for s, _ in targets)
    first = targets[0][0]["scenario"]
    fig.suptitle(
        f"loadtest {names}: {first['members']} members over {first['tasks']} tasks, "
        f"{first['groups']} groups, {first['duration_s']:.0f} s"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # room for the title
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _percentile_bars(ax: Any, summaries: list[dict[str, Any]]) -> None:
    ops = [op for op in HEADLINE_OPS if all(_op_stats(s, op) for s in summaries)]
    names = ("p50", "p99", "p99_9") if len(summaries) > 1 else PERCENTILE_NAMES
    groups = len(summaries) * len(names)
    width = 0.8 / groups
    for t, summary in enumerate(summaries):
        for q, name in enumerate(names):
            values = [max(_op_stats(summary, op).get(name) or 0.0, 1e-3) for op in ops]
            offset = (t * len(names) + q - (groups - 1) / 2) * width
            ax.bar(
                [i + offset for i in range(len(ops))],
                values,
                width,
                label=f"{summary['target']} {name.replace('_', '.')}",
                color=_COLORS[t % len(_COLORS)] if len(summaries) > 1 else _COLORS[q % len(_COLORS)],
                alpha=0.35 + 0.65 * (q + 1) / len(names) if len(summaries) > 1 else 0.9,
            )
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels(ops, rotation=20, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("latency ms (log)")
    ax.set_title("latency percentiles per operation (join = until first assignment)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)


def _requests(frame: Any) -> Any:
    return frame[frame["op"].isin(REQUEST_OPS)]


def _per_second(frame: Any, series: Any) -> Any:
    """A per-second series with the seconds nothing happened filled with 0."""
    seconds = frame["second"]
    if seconds.empty:
        return series
    full = range(max(int(seconds.min()), 0), int(seconds.max()) + 1)
    return series.reindex(full, fill_value=0)


def _throughput(ax: Any, frame: Any, label: str, color: str, steady: tuple[str, str]) -> None:
    per_second = _per_second(frame, _requests(frame).groupby("second")["count"].sum())
    ax.plot(per_second.index, per_second.values, color=color, label=f"{label} all requests")
    for style, op in zip((":", "--"), steady, strict=True):
        ops = _per_second(frame, frame[frame["op"] == op].groupby("second")["count"].sum())
        ax.plot(ops.index, ops.values, color=color, linestyle=style, alpha=0.7, label=f"{label} {op}")


def _p99(ax: Any, frame: Any, label: str, color: str, steady: tuple[str, str]) -> None:
    for style, op in zip(("-", "--"), steady, strict=True):
        ops = frame[frame["op"] == op].set_index("second")["p99_ms"].dropna()
        ax.plot(ops.index, ops.values, color=color, linestyle=style, label=f"{label} {op} p99")


def _errors(ax: Any, frame: Any, label: str, color: str) -> None:
    grouped = _requests(frame).groupby("second")
    errors = _per_second(frame, grouped["errors"].sum())
    unexpected = _per_second(frame, grouped["unexpected"].sum())
    signals = errors - unexpected
    ax.plot(signals.index, signals.values, color=color, label=f"{label} signals (27/22/79...)")
    ax.plot(unexpected.index, unexpected.values, color=color, linestyle="--", label=f"{label} unexpected")
    lag = frame[(frame["op"] == "loop_lag") & (frame["second"] >= 0)].set_index("second")["max_ms"]
    twin = getattr(ax, "_lag_twin", None)
    if twin is None:
        twin = ax.twinx()
        twin.set_ylabel("client loop lag max (ms)")
        ax._lag_twin = twin
    twin.plot(lag.index, lag.values, color=color, linestyle=":", alpha=0.8)


def _reconciliation(ax: Any, summary: dict[str, Any], label: str, color: str) -> None:
    """Each listed reconciled epoch (summary by_generation) as a point at its start."""
    listed = summary["rebalances"]["by_generation"]
    if not listed:
        return
    ordered = sorted(listed, key=lambda r: (r.get("start_s") or 0.0, r["group"], r["generation"]))
    xs = [r.get("start_s") or 0.0 for r in ordered]
    ax.scatter(
        xs, [max(r["duration_ms"], 1e-3) for r in ordered], s=10, color=color, label=f"{label} reconciled"
    )
    handover = [max(r.get("handover_ms") or 0.0, 1e-3) for r in ordered]
    ax.scatter(xs, handover, s=10, color=color, marker="x", alpha=0.6, label=f"{label} handover")


_OP_COLORS = plt.get_cmap("tab20")
_MAX_LANES = 40


def _latency_per_op(ax: Any, frame: Any, label: str, several: bool) -> None:
    requests = _requests(frame)
    style = "--" if several and getattr(ax, "_lines_drawn", False) else "-"
    for index, op in enumerate(op for op in REQUEST_OPS if op in set(requests["op"])):
        ops = requests[requests["op"] == op].set_index("second")["p99_ms"].dropna()
        ax.plot(
            ops.index, ops.values.clip(min=1e-3), color=_OP_COLORS(index % 20), linestyle=style,
            label=f"{label} {op}" if several else op,
        )  # fmt: skip
    ax._lines_drawn = True


def _end_to_end(ax: Any, frame: Any, label: str, color: str) -> None:
    rows = frame[(frame["op"] == CONSUMED_OP) & (frame["second"] >= 0)].set_index("second")
    ax.plot(rows.index, rows["p50_ms"].clip(lower=1e-3), color=color, label=f"{label} p50")
    ax.plot(rows.index, rows["p99_ms"].clip(lower=1e-3), color=color, linestyle="--", label=f"{label} p99")


def _lag(ax: Any, summary: dict[str, Any], color: str) -> None:
    lag = summary["pipeline"]["lag_by_second"]
    seconds = [r["second"] for r in lag]
    label = summary["target"]
    ax.plot(seconds, [r["max_records"] for r in lag], color=color, label=f"{label} most behind group")
    ax.plot(
        seconds, [r["total_records"] for r in lag], color=color, linestyle="--", label=f"{label} all groups"
    )
    drain_from = summary["scenario"]["duration_s"] - summary["pipeline"]["drain_s"]
    ax.axvline(drain_from, color=color, linestyle=":", alpha=0.6)


def _group_lanes(ax: Any, summaries: list[dict[str, Any]]) -> None:
    """One lane per group (the first groups by name), one bar per completed generation."""
    lanes: list[str] = []
    for index, summary in enumerate(summaries):
        color = _COLORS[index % len(_COLORS)]
        per_group: dict[str, list[tuple[float, float]]] = {}
        for row in summary["rebalances"]["by_generation"]:
            start = row.get("start_s")
            if start is None:
                continue
            width = max(float(row["duration_ms"]) / 1000.0, 0.05)
            per_group.setdefault(row["group"], []).append((float(start), width))
        for group in sorted(per_group)[: _MAX_LANES // len(summaries)]:
            lane = len(lanes)
            lanes.append(f"{summary['target']} {group.rsplit('-', 1)[-1]}")
            ax.broken_barh(per_group[group], (lane - 0.4, 0.8), color=color, alpha=0.8)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=7)
    ax.set_ylim(-1, max(len(lanes), 1))
    ax.grid(True, axis="x", alpha=0.3)


def _epochs(ax: Any, frame: Any, label: str, color: str) -> None:
    rows = frame[frame["op"] == RECONCILIATION_OP]
    if rows.empty:
        return
    per_second = rows.groupby("second")
    superseded = _per_second(frame, per_second["errors"].sum())
    reconciled = _per_second(frame, per_second["count"].sum()) - superseded
    ax.plot(reconciled.index, reconciled.values, color=color, label=f"{label} reconciled")
    ax.plot(superseded.index, superseded.values, color=color, linestyle="--", label=f"{label} superseded")
    double = frame[frame["op"] == "double_ownership"].groupby("second")["count"].sum()
    if not double.empty:
        double = _per_second(frame, double)
        ax.plot(double.index, double.values, color=color, linestyle=":", label=f"{label} double ownership")


# the page


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _target_section(summary: dict[str, Any]) -> str:
    members = summary["members"]
    requests = summary["requests"]
    rebalances = summary["rebalances"]
    parts = [f"<h2>{html.escape(summary['target'])} — {html.escape(summary['bootstrap'])}</h2>"]
    if summary["client_saturated"]:
        parts.append(
            "<p class=warn>The client was saturated (event-loop lag above the threshold): "
            "latencies include client-side queueing. Use more tasks or fewer members per task.</p>"
        )
    parts.append(
        _table(
            [
                "members started",
                "joined",
                "not joined",
                "aborted before join",
                "killed",
                "churned",
                "requests",
                "requests/s",
                "unexpected errors",
            ],
            [
                [
                    _fmt(members["started"]),
                    _fmt(members["joined"]),
                    _fmt(members["not_joined"]),
                    _fmt(members["aborted_before_join"]),
                    _fmt(members["killed"]),
                    _fmt(members["churned"]),
                    _fmt(requests["count"]),
                    _fmt(requests["rate_per_s"]),
                    _fmt(requests["unexpected_errors"]),
                ]
            ],
        )
    )
    parts.append("<h3>Operations (latency of answered requests)</h3>")
    parts.append(_table(HEADLINE_HEADER, headline_rows(summary)))
    codes = [
        [op, code, _fmt(n)]
        for op, stats in [("join", summary["join"]), *summary["operations"].items()]
        for code, n in (stats or {}).get("errors_by_code", {}).items()
    ]
    if codes:
        parts.append("<h3>Non-zero codes</h3>")
        parts.append(_table(["op", "code", "count"], codes))
    if requests["unexpected_by_code"]:
        parts.append("<h3>Unexpected codes</h3>")
        parts.append(
            _table(["code", "count"], [[k, _fmt(v)] for k, v in requests["unexpected_by_code"].items()])
        )
    d = rebalances["duration_ms"]
    if is_consumer(summary):
        parts.append(_reconciliation_section(summary))
    else:
        parts.append("<h3>Rebalances (per group and generation: first rejoin to last assignment)</h3>")
        parts.append(
            _table(
                ["generations", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"],
                [
                    [
                        _fmt(rebalances["generations"]),
                        *(_fmt(d.get(n), 1) for n in PERCENTILE_NAMES),
                        _fmt(d.get("max"), 1),
                    ]
                ],
            )
        )
    if "pipeline" in summary:
        parts.append(_pipeline_section(summary))
    by_group = rebalances.get("by_group") or []
    if by_group:
        noun = "epochs reconciled" if is_consumer(summary) else "generations"
        parts.append(f"<h3>Per group ({noun}; times in seconds since the start)</h3>")
        parts.append(
            _table(
                ["group", noun, "last", "first at s", "last at s", "p50 ms", "max ms"],
                [
                    [
                        g["group"],
                        _fmt(g["generations"]),
                        str(g["last_generation"]),
                        _fmt(g["first_s"], 1),
                        _fmt(g["last_s"], 1),
                        _fmt(g["p50_ms"], 1),
                        _fmt(g["max_ms"], 1),
                    ]
                    for g in by_group
                ],
            )
        )
    placement = summary.get("placement") or []
    if placement:
        parts.append("<h3>Where the tasks ran (Spark executors)</h3>")
        parts.append(
            _table(
                ["task", "executor", "host", "rows"],
                [[str(p["task"]), p["executor"], p["host"], _fmt(p["rows"])] for p in placement],
            )
        )
    lag = summary["loop_lag"]
    parts.append(f"<h3>Client event-loop lag (threshold {lag['threshold_ms']} ms)</h3>")
    parts.append(
        _table(
            ["task", "p50 ms", "p99 ms", "max ms", "samples over threshold", "saturated"],
            [
                [
                    str(t["task"]),
                    _fmt(t["p50_ms"], 2),
                    _fmt(t["p99_ms"], 2),
                    _fmt(t["max_ms"], 1),
                    f"{t['samples_over_threshold']} / {t['samples']}",
                    str(t["saturated"]),
                ]
                for t in lag["tasks"]
            ],
        )
    )
    scenario = summary["scenario"]
    parts.append(
        "<details><summary>scenario</summary><pre>"
        + html.escape(json.dumps(scenario, indent=2))
        + "</pre></details>"
    )
    return "\n".join(parts)


def _pipeline_section(summary: dict[str, Any]) -> str:
    pipe = summary["pipeline"]
    e2e = pipe["end_to_end_ms"]
    parts = [
        "<h3>Pipeline (records produced through the broker and consumed by every group of their "
        f"topic; the producers stop {pipe['drain_s']:.0f} s before the end)</h3>",
        _table(
            [
                "target rate/s",
                "acknowledged",
                "rate/s",
                "groups",
                "consumed",
                "lost",
                "duplicated",
                "lag at the end",
            ],
            [
                [
                    _fmt(pipe["target_rate_per_s"]),
                    _fmt(pipe["acknowledged"]),
                    _fmt(pipe["acknowledged_rate_per_s"]),
                    _fmt(pipe["groups"]),
                    _fmt(pipe["consumed"]),
                    _fmt(pipe["lost"]),
                    _fmt(pipe["duplicated"]),
                    _fmt(pipe["final_lag"]),
                ]
            ],
        ),
        _table(
            ["end to end (produce to consume)", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"],
            [["records", *(_fmt(e2e.get(n), 1) for n in PERCENTILE_NAMES), _fmt(e2e.get("max"), 1)]],
        ),
    ]
    if pipe["lost"]:
        parts.append(
            "<p class=warn>Acknowledged records never consumed: "
            + html.escape(", ".join(f"{g} {n}" for g, n in pipe["lost_by_group"].items()))
            + "</p>"
        )
    return "\n".join(parts)


def _reconciliation_section(summary: dict[str, Any]) -> str:
    rec = summary["reconciliation"]
    parts = [
        "<h3>Reconciliation (KIP-848, per group epoch: first response with the epoch until every "
        "member reports it and the members own a complete disjoint split; handover: until the last "
        "change of an owned set)</h3>"
    ]
    header = ["", "epochs", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"]
    rows = []
    for name, count, stats in (
        ("reconciliation", rec["epochs_reconciled"], rec["duration_ms"]),
        ("handover", rec["epochs_reconciled"], rec["handover_ms"]),
    ):
        rows.append(
            [name, _fmt(count), *(_fmt(stats.get(n), 1) for n in PERCENTILE_NAMES), _fmt(stats.get("max"), 1)]
        )
    parts.append(_table(header, rows))
    not_converged = rec["groups"] - rec["groups_converged"]
    parts.append(
        _table(
            [
                "single-member epochs (not in the percentiles)",
                "epochs superseded before reconciled",
                "groups",
                "reconciled when the load stopped",
                "double ownership",
            ],
            [
                [
                    _fmt(rec["epochs_single_member"]),
                    _fmt(rec["epochs_superseded"]),
                    _fmt(rec["groups"]),
                    _fmt(rec["groups_converged"]),
                    _fmt(rec["double_ownership"]),
                ]
            ],
        )
    )
    if not_converged:
        names = ", ".join(rec["groups_not_converged"])
        parts.append(f"<p class=warn>Not reconciled when the load stopped: {html.escape(names)}</p>")
    if rec["double_ownership"]:
        parts.append(
            "<p class=warn>Two members of a group owned the same partition at the same time "
            "(see the executors' stderr for the first cases).</p>"
        )
    return "\n".join(parts)


def write_html(
    path: Path, png: Path, summaries: list[dict[str, Any]], baseline: dict[str, Any] | None = None
) -> None:
    image = base64.b64encode(png.read_bytes()).decode()
    title = "loadtest " + " vs ".join(s["target"] for s in summaries)
    sections = []
    if len(summaries) == 2:
        a, b = summaries
        sections.append(f"<h2>Comparison ({html.escape(b['target'])} / {html.escape(a['target'])})</h2>")
        sections.append(_table(compare_header(a["target"], b["target"]), compare_rows(a, b)))
    if baseline is not None:
        sections.append(baseline_section(baseline, summaries))
    sections += [_target_section(s) for s in summaries]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
th {{ background: #f3f3f3; }}
.warn {{ color: #a00; font-weight: bold; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>run {html.escape(", ".join(s["run_id"] for s in summaries))}</p>
<img alt="report" src="data:image/png;base64,{image}">
{"".join(sections)}
</body></html>
"""
    path.write_text(page)


def baseline_label(baseline: dict[str, Any]) -> str:
    return f"baseline {baseline['run_id']}"


def baseline_section(baseline: dict[str, Any], summaries: list[dict[str, Any]]) -> str:
    """Each target of this run against a previous run's summary, as ratios this / baseline."""
    parts = []
    base = baseline_label(baseline)
    for summary in summaries:
        if is_consumer(summary) != is_consumer(baseline):
            parts.append(
                f"<p class=warn>{html.escape(summary['target'])}: the baseline ran the other group "
                "protocol; not compared.</p>"
            )
            continue
        parts.append(
            f"<h2>{html.escape(summary['target'])} compared with {html.escape(base)} "
            f"({html.escape(baseline['target'])}, {html.escape(baseline['bootstrap'])})</h2>"
        )
        parts.append(_table(compare_header(base, summary["target"]), compare_rows(baseline, summary)))
    return "\n".join(parts)
