"""Summaries: the metrics of each workload, medians with min-max, ratios ours/peer, the table."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.common import DASH, TIMES
from runner.servers import source_digest


@dataclass
class Metric:
    label: str
    unit: str
    higher_is_better: bool
    value: Callable[[dict[str, Any]], float | None]
    cpu_unit: str = ""  # how CPU per op is shown
    cpu: Callable[[dict[str, Any]], float | None] | None = None
    target: float | None = None


def _extra(key: str) -> Callable[[dict[str, Any]], float | None]:
    def get(r: dict[str, Any]) -> float | None:
        v = (r.get("extra") or {}).get(key)
        return float(v) if isinstance(v, (int, float)) and v >= 0 else None

    return get


def _field(key: str) -> Callable[[dict[str, Any]], float | None]:
    def get(r: dict[str, Any]) -> float | None:
        v = r.get(key)
        return float(v) if isinstance(v, (int, float)) and r.get("ops") else None

    return get


def _cpu_per_op(scale: float, precise: bool = False) -> Callable[[dict[str, Any]], float | None]:
    """Server CPU seconds per op from /proc/PID/stat (utime + stime, 10 ms ticks); with
    ``precise``, from the threads' /proc/PID/task/*/schedstat (ns) for phases too short for ticks."""

    def get(r: dict[str, Any]) -> float | None:
        ops = r.get("ops") or 0
        cpu = (
            r.get("server_sched_cpu_s") if precise and r.get("server_sched_cpu_s") else r.get("server_cpu_s")
        )
        if not ops or cpu is None:
            return None
        return float(cpu) / ops * scale

    return get


TARGETS: dict[str, float] = {
    "rebalance-join-1": 5.0,
    "rebalance-join-1000": 500.0,
    "rebalance-rejoin-1000": 1000.0,
    "heartbeat": 190_000.0,
    "heartbeat p99": 10.0,
    "commit-simple-1p": 50_000.0,
    "commit-member-1p": 50_000.0,
    "commit-simple-100p": 1_000_000.0,
    "commit-member-100p": 1_000_000.0,
    "mem:commit-simple-1p": 100_000.0,
    "mem:commit-member-1p": 100_000.0,
    "fetch-1p": 1_000_000.0,
    "fetch-100p": 1_000_000.0,
    "groups": 10_000.0,
    "groups rss": 2048.0,
    "restart": 3.0,
    "restart first served": 1.0,
}


def metrics_for(name: str) -> list[Metric]:
    base = name.removeprefix("pg:").removeprefix("mem:")
    if base.startswith(("rebalance-join-", "rebalance-rejoin-", "rebalance-delay3s-")):
        ms: list[Metric] = [
            Metric(
                f"{name}: first JoinGroup → last SyncGroup"
                if "-join-" in base
                else f"{name}: +1 member → all synced",
                "ms",
                False,
                _extra("median_ms"),
                "ms CPU per rebalance",
                _cpu_per_op(1000, precise=True),
                TARGETS.get(base),
            )
        ]
        if "-join-" in base:
            ms.append(Metric(f"{name}: per-member join p50", "ms", False, _field("p50_ms")))
            ms.append(Metric(f"{name}: per-member join p99", "ms", False, _field("p99_ms")))
        return ms
    if base == "heartbeat":
        return [
            Metric("heartbeat: requests/s", "req/s", True, _field("rate"), "µs CPU per request", _cpu_per_op(1e6), TARGETS["heartbeat"]),
            Metric("heartbeat: p50", "ms", False, _field("p50_ms")),
            Metric("heartbeat: p99", "ms", False, _field("p99_ms"), target=TARGETS["heartbeat p99"]),
        ]  # fmt: skip
    if base.startswith("commit-"):
        per_req = base.endswith("-1p")
        return [
            Metric(f"{name}: requests/s", "req/s", True, _field("rate"), "µs CPU per request", _cpu_per_op(1e6),
                   TARGETS.get(name, TARGETS.get(base)) if per_req else None),
            Metric(f"{name}: partitions/s", "part/s", True, _field("unit_rate"),
                   target=None if per_req else TARGETS.get(base)),
            Metric(f"{name}: p50", "ms", False, _field("p50_ms")),
            Metric(f"{name}: p99", "ms", False, _field("p99_ms"), target=10.0),
        ]  # fmt: skip
    if base.startswith("fetch-"):
        return [
            Metric(f"{name}: partitions/s", "part/s", True, _field("unit_rate"), "µs CPU per request",
                   _cpu_per_op(1e6), TARGETS.get(base)),
            Metric(f"{name}: requests/s", "req/s", True, _field("rate")),
            Metric(f"{name}: p99", "ms", False, _field("p99_ms")),
        ]  # fmt: skip
    if base == "groups":
        return [
            Metric("groups: groups created/s", "groups/s", True, _field("rate"), "µs CPU per group", _cpu_per_op(1e6), TARGETS["groups"]),
            Metric("groups: RSS per idle group", "B", False, _extra("rss_per_group_bytes"), target=TARGETS["groups rss"]),
        ]  # fmt: skip
    if base.startswith("restart-"):
        return [
            Metric(f"{name}: process start → state loaded", "s", False, _field("seconds"), "s CPU to load",
                   lambda r: r.get("server_cpu_s") if r.get("ops") else None, TARGETS["restart"]),
            Metric(f"{name}: process start → first group served", "s", False, _field("first_served_s"),
                   target=TARGETS["restart first served"]),
            Metric(f"{name}: RSS after load", "MB", False,
                   lambda r: r["rss_after_kb"] / 1024 if r.get("ops") and r.get("rss_after_kb") else None),
        ]  # fmt: skip
    return []


def fmt(v: float | None) -> str:
    if v is None:
        return DASH
    a = abs(v)
    if a >= 100_000:
        return f"{v / 1000:,.0f}k"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def spread(values: list[float]) -> str:
    if not values:
        return DASH
    med = statistics.median(values)
    if len(values) == 1:
        return fmt(med)
    return f"{fmt(med)} ({fmt(min(values))}{DASH}{fmt(max(values))})"


@dataclass
class Row:
    metric: Metric
    ours: list[float | None] = field(default_factory=list)
    peer: list[float | None] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    peer_cpu: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def summarize(raw: dict[str, dict[str, list[list[dict[str, Any]]]]]) -> tuple[str, list[dict[str, Any]]]:
    """raw[workload][kind] = per repeat, the generator's results. Returns Markdown and rows."""
    lines = [
        f"| metric | ours: median (min{DASH}max) | peer: median (min{DASH}max) | ours/peer per repeat | ours CPU/op | peer CPU/op | target | met |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    table: list[dict[str, Any]] = []
    for by_kind in raw.values():
        names: list[str] = []
        for reps in by_kind.values():
            for rep in reps:
                for r in rep:
                    if r.get("name") and r["name"] not in names and metrics_for(r["name"]):
                        names.append(r["name"])
        for name in names:
            for metric in metrics_for(name):
                row = Row(metric)
                for kind in ("ours", "peer"):
                    # ours-pg results carry a "pg:" prefix and live under "ours".
                    for rep in by_kind.get(kind, []):
                        found = [x for x in rep if x.get("name") == name]
                        hit = found[0] if found else None
                        value = metric.value(hit) if hit else None
                        if hit is not None and not hit.get("done", True) and hit.get("note"):
                            row.notes.append(f"{kind}: {hit['note']}")
                        if hit is not None and hit.get("errors"):
                            row.notes.append(f"{kind}: error codes {hit['errors']}")
                        (row.ours if kind == "ours" else row.peer).append(value)
                        if metric.cpu is not None and hit is not None:
                            cpu = metric.cpu(hit)
                            if cpu is not None:
                                (row.ours_cpu if kind == "ours" else row.peer_cpu).append(cpu)
                ours_vals = [v for v in row.ours if v is not None]
                peer_vals = [v for v in row.peer if v is not None]
                ratios = [
                    o / p
                    for o, p in zip(row.ours, row.peer, strict=False)
                    if o is not None and p is not None and p > 0
                ]
                target_txt, met = "", ""
                if metric.target is not None:
                    target_txt = ("≥ " if metric.higher_is_better else "≤ ") + fmt(metric.target)
                    if ours_vals:
                        med = statistics.median(ours_vals)
                        ok = med >= metric.target if metric.higher_is_better else med <= metric.target
                        met = "yes" if ok else "**no**"
                    else:
                        met = "**no** (no result)"
                if ratios and metric.cpu is not None:
                    rmed = statistics.median(ratios)
                    ten = rmed >= 10 if metric.higher_is_better else rmed <= 0.1
                    met = (met + "; " if met else "") + (
                        f"10{TIMES} peer: yes" if ten else f"10{TIMES} peer: **no**"
                    )
                ratio_txt = ", ".join(f"{x:.3g}" for x in ratios) if ratios else DASH
                unit = f" {metric.unit}"
                lines.append(
                    f"| {metric.label} ({unit.strip()}) | {spread(ours_vals)} | {spread(peer_vals)} | {ratio_txt} | "
                    f"{spread(row.ours_cpu) + ' ' + metric.cpu_unit if row.ours_cpu else ''} | "
                    f"{spread(row.peer_cpu) + ' ' + metric.cpu_unit if row.peer_cpu else ''} | {target_txt} | {met} |"
                )
                table.append(
                    {
                        "metric": metric.label,
                        "unit": metric.unit,
                        "ours": row.ours,
                        "peer": row.peer,
                        "ratios": ratios,
                        "ours_cpu": row.ours_cpu,
                        "peer_cpu": row.peer_cpu,
                        "target": metric.target,
                        "met": met,
                        "notes": sorted(set(row.notes)),
                    }
                )
    notes = sorted({n for row in table for n in row["notes"]})
    if notes:
        lines.append("")
        lines.append("Notes:")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines), table


@dataclass
class IssueRow:
    """One line of the issue's table: a result's figure for the peer and for us, and the target."""

    workload: str
    name: str  # the generator's result name (ours); the peer's is the same without a prefix
    value: Callable[[dict[str, Any]], float | None]
    unit: str
    target: float | None
    higher_is_better: bool = True
    cpu_target_us: float | None = None  # µs of server CPU per request


ISSUE_ROWS = [
    IssueRow(f"OffsetCommit, 1 partition, 16 {TIMES} 8 (simple consumer)", "commit-simple-1p", _field("rate"), "req/s", 50_000, cpu_target_us=20),
    IssueRow(f"OffsetCommit, 1 partition, 16 {TIMES} 8 (as member)", "commit-member-1p", _field("rate"), "req/s", 50_000, cpu_target_us=20),
    IssueRow("OffsetCommit 1 partition p50 / p99 (simple)", "commit-simple-1p", _field("p99_ms"), "ms p99", 10, higher_is_better=False),
    IssueRow("OffsetCommit, 100 partitions (simple)", "commit-simple-100p", _field("unit_rate"), "partitions/s", 1_000_000),
    IssueRow("OffsetCommit with memory://, 1 partition (simple)", "mem:commit-simple-1p", _field("rate"), "req/s", 100_000),
    IssueRow(f"Heartbeats, 16 {TIMES} 8", "heartbeat", _field("rate"), "req/s", 190_000),
    IssueRow("RSS per idle group (groups workload)", "groups", _extra("rss_per_group_bytes"), "B", 2048, higher_is_better=False),
    # Groups are served once the whole state is loaded, so the first is served at the same moment.
    IssueRow("restart: start → first group served", "restart-", _field("first_served_s"), "s", 1, higher_is_better=False),
    IssueRow("restart: start → everything loaded", "restart-", _field("seconds"), "s", 3, higher_is_better=False),
]  # fmt: skip


def _matches(name: str, want: str) -> bool:
    """A result name equals ``want``, or starts with it when ``want`` ends in "-" (sized names)."""
    return name.startswith(want) if want.endswith("-") else name == want


def issue_table(raw: dict[str, dict[str, list[list[dict[str, Any]]]]]) -> str:
    """The issue's table: medians of peer and ours (SQLite FULL), server CPU per request, target."""
    lines = [
        "| workload | peer: median | peer: CPU per request | ours: median | ours: CPU per request "
        "| p50 / p99 ms (ours) | target | met |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in ISSUE_ROWS:
        found: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
        for by_kind in raw.values():
            for kind, reps in by_kind.items():
                want = row.name if kind == "ours" else row.name.split(":")[-1]
                if kind == "peer" and ":" in row.name:
                    continue  # a variant of our server only
                found.setdefault(kind, []).extend(
                    r for rep in reps for r in rep if _matches(str(r.get("name") or ""), want)
                )
        ours = [v for v in map(row.value, found["ours"]) if v is not None]
        peer = [v for v in map(row.value, found["peer"]) if v is not None]
        cpu = [v for v in map(_cpu_per_op(1e6), found["ours"]) if v is not None]
        peer_cpu = [v for v in map(_cpu_per_op(1e6), found["peer"]) if v is not None]
        p50 = [v for v in map(_field("p50_ms"), found["ours"]) if v is not None]
        p99 = [v for v in map(_field("p99_ms"), found["ours"]) if v is not None]
        cmp = "≥ " if row.higher_is_better else "≤ "
        target = f"{cmp}{fmt(row.target)} {row.unit}" if row.target is not None else ""
        met = ""
        if row.target is not None:
            if not ours:
                met = "**no** (no result)"
            else:
                med = statistics.median(ours)
                ok = med >= row.target if row.higher_is_better else med <= row.target
                met = "yes" if ok else "**no**"
        if row.cpu_target_us is not None:
            target += f", ≤ {fmt(row.cpu_target_us)} µs CPU"
            if cpu:
                met += "; CPU " + ("yes" if statistics.median(cpu) <= row.cpu_target_us else "**no**")
        latency = f"{spread(p50)} / {spread(p99)}" if p50 and row.unit == "req/s" else ""
        per_request = row.unit in ("req/s", "partitions/s")
        lines.append(
            f"| {row.workload} | {spread(peer)} | {spread(peer_cpu) + ' µs' if peer_cpu and per_request else ''} | "
            f"{spread(ours)} {row.unit} | {spread(cpu) + ' µs' if cpu and per_request else ''} | {latency} | "
            f"{target} | {met} |"
        )
    return "\n".join(lines)


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    go = subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.strip()
    return (
        f"sources {source_digest()}; "
        f"{os.cpu_count()} CPUs ({model}), {mem_kb / 1024 / 1024:.1f} GiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, {go}; load average at start "
        f"{os.getloadavg()[0]:.2f}"
    )


def one_line(r: dict[str, Any]) -> str:
    """One raw result on one line, for the progress log."""
    keys = ("rate", "unit_rate", "p50_ms", "p99_ms", "seconds", "server_cpu_s")
    parts = [f"{key}={fmt(float(r[key]))}" for key in keys if r.get(key)]
    extra = r.get("extra") or {}
    if "median_ms" in extra:
        parts.append(f"median_ms={fmt(float(extra['median_ms']))}")
    if "rss_per_group_bytes" in extra:
        parts.append(f"rss/group={fmt(float(extra['rss_per_group_bytes']))} B")
    if extra.get("cpu_pressure_avg10") is not None:
        parts.append(f"cpu_pressure={extra['cpu_pressure_avg10']}%")
    if r.get("errors"):
        parts.append(f"errors={r['errors']}")
    if not r.get("done", True):
        parts.append(f"NOT DONE: {r.get('note')}")
    return " ".join(parts)
