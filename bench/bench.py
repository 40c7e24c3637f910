"""Runs every workload in claij and in each peer, one after another on this machine,
prints the comparison table and writes it as JSON. Started by `bash bench/run`, which
prepares the virtual environment and builds claij-bench; see docs/PERFORMANCE.md.

Each measurement runs in a process of its own (so peak memory is per measurement), and
each prints one JSON object (bench/claij-bench/src/main.rs, bench/peers/*.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")
sys.path.insert(0, PEERS)
import common  # noqa: E402  (bench/peers/common.py)

FULL = {
    "reps": 5,
    "w1_transitions": 1000,
    "w1_claij_runs_per_rep": 100,
    "w2_transitions": 1000,
    "w3_steps": "100,200,400,800",
    "w4_runs": 10000,
    "w4_transitions": 10,
    "fsync_samples": 1000,
}
SMOKE = {
    "reps": 1,
    "w1_transitions": 100,
    "w1_claij_runs_per_rep": 10,
    "w2_transitions": 50,
    "w3_steps": "10,20,40",
    "w4_runs": 200,
    "w4_transitions": 10,
    "fsync_samples": 50,
}

# The targets of issue 9.
TARGETS = {
    "w1_langgraph": 200.0,   # claij ≥200× faster per transition than LangGraph (validation on)
    "w1_burr": 40.0,         # ≥40× Burr
    "w2_strict_fsync": 1.5,  # strict within 1.5× of one fsync per transition
    "w2_strict_langgraph": 5.0,
    "w2_normal_langgraph": 30.0,
    "w3_event_ratio": 1.2,   # ≤1.2× the events' bytes (plus fixed overhead)
    "w4_langgraph": 100.0,   # ≥100× LangGraph's runs per second
    "w4_bytes_per_run": 8 * 1024,
    "w5_call_ratio": 0.75,   # claij's tools/call round trip ≤0.75× the Python SDK's
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_json(argv: list[str], what: str) -> dict:
    """Runs one measurement; its stdout's last line is its JSON result."""
    log(f"  {what} …")
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench: `{' '.join(argv)}` failed (exit {proc.returncode})")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    result = json.loads(lines[-1])
    result["wall_s"] = round(time.perf_counter() - started, 2)
    return result


# ---------------------------------------------------------------- the machine


def machine(bench_dir: str) -> dict:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "disk": disk(bench_dir),
        "kernel": platform.release(),
        "load_at_start": os.getloadavg(),
    }


def disk(path: str) -> dict:
    """The device and file system the benchmark's files are on."""
    path = os.path.realpath(path)
    best = ("", "", "")
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[1]):
                best = (dev, mnt, fstype)
    dev, mnt, fstype = best
    info = {"device": dev, "mount": mnt, "fs": fstype, "dir": path}
    name = os.path.basename(dev)
    for key, rel in (("rotational", "queue/rotational"), ("model", "device/model")):
        p = f"/sys/block/{name}/{rel}"
        if os.path.exists(p):
            with open(p) as f:
                info[key] = f.read().strip()
    usage = shutil.disk_usage(path)
    info["size_gib"] = round(usage.total / 2**30)
    info["free_gib"] = round(usage.free / 2**30)
    return info


def fsync_latency(directory: str, samples: int) -> dict:
    """One fsync on this disk, in the benchmark's directory: the median time of
    fdatasync (what SQLite calls) and of fsync after appending one WAL frame
    (4,096-byte page + 24-byte header) to a file."""
    path = os.path.join(directory, "fsync-probe.tmp")
    out = {"samples": samples, "write_bytes": 4120}
    for name, sync in (("fdatasync", os.fdatasync), ("fsync", os.fsync)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        times = []
        try:
            for _ in range(samples + 10):
                os.write(fd, b"x" * 4120)
                t = time.perf_counter()
                sync(fd)
                times.append(time.perf_counter() - t)
        finally:
            os.close(fd)
            os.remove(path)
        times = times[10:]
        out[f"{name}_median_us"] = statistics.median(times) * 1e6
        out[f"{name}_p90_us"] = sorted(times)[int(len(times) * 0.9)] * 1e6
    return out


def versions(claij_bin: str) -> dict:
    v = {"python": platform.python_version()}
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                "apache-burr", "jsonschema", "mcp"):
        try:
            v[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    v["sqlite (python)"] = sqlite3.sqlite_version
    try:
        v["rustc"] = subprocess.run(["rustc", "-V"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    v["claij-bench"] = claij_bin
    return v


# ---------------------------------------------------------------- the workloads


def w1(claij: list[str], py: list[str], size: dict) -> dict:
    log("W1 in memory")
    t, r = str(size["w1_transitions"]), str(size["reps"])
    # One claij run of 1,000 transitions lasts about a millisecond: a repetition is a batch
    # of runs, so that it lasts about as long as one of the peers' runs.
    out = {"claij": run_json(claij + ["w1", "--transitions", t, "--reps", r, "--batch",
                                      str(size["w1_claij_runs_per_rep"])], "claij")}
    for engine in ("langgraph", "burr"):
        for validate in ("on", "off"):
            out[f"{engine}_validate_{validate}"] = run_json(
                py + [os.path.join(PEERS, f"{engine}_bench.py"), "w1", "--transitions", t,
                      "--reps", r, "--validate", validate],
                f"{engine}, validation {validate}")
    return out


def w2(claij: list[str], py: list[str], size: dict, bench_dir: str) -> dict:
    log("W2 durable")
    t, r = str(size["w2_transitions"]), str(size["reps"])
    out = {"fsync": fsync_latency(bench_dir, size["fsync_samples"])}
    for durability in ("strict", "normal"):
        out[f"claij_{durability}"] = run_json(
            claij + ["w2", "--transitions", t, "--reps", r, "--dir", bench_dir,
                     "--durability", durability], f"claij {durability}")
    for engine in ("langgraph", "burr"):
        out[engine] = run_json(
            py + [os.path.join(PEERS, f"{engine}_bench.py"), "w2", "--transitions", t,
                  "--reps", r, "--dir", bench_dir], engine)
    return out


def settled(path: str) -> int:
    return common.settled_file_bytes(path)


def w3(claij: list[str], py: list[str], size: dict, bench_dir: str) -> dict:
    log("W3 growth")
    steps = size["w3_steps"]
    c = run_json(claij + ["w3", "--steps", steps, "--dir", bench_dir], "claij")
    # claij's files, measured now that its process has closed them.
    empty = settled(c["empty_file"])
    for p in c["points"]:
        p["file_bytes"] = settled(p["file"]) - empty
        common.remove_db(p["file"])
    common.remove_db(c["empty_file"])
    out = {"claij": c}
    for engine, variant in (("langgraph", "default"), ("langgraph", "delta"), ("burr", "default")):
        out[f"{engine}_{variant}"] = run_json(
            py + [os.path.join(PEERS, f"{engine}_bench.py"), "w3", "--steps", steps,
                  "--dir", bench_dir, "--variant", variant], f"{engine} ({variant})")
    return out


def w4(claij: list[str], py: list[str], size: dict) -> dict:
    log("W4 many runs")
    n, t, r = str(size["w4_runs"]), str(size["w4_transitions"]), str(size["reps"])
    out = {}
    for mode in ("seq", "concurrent"):
        out[f"claij_{mode}"] = run_json(
            claij + ["w4", "--runs", n, "--transitions", t, "--reps", r, "--mode", mode],
            f"claij {mode}")
    for at in ("1", str(size["w4_transitions"] // 2)):
        out[f"claij_mem_at_{at}"] = run_json(
            claij + ["w4mem", "--runs", n, "--transitions", t, "--at", at],
            f"claij memory per run, held at transition {at}")
    for engine in ("langgraph", "burr"):
        for mode in ("seq", "concurrent"):
            out[f"{engine}_{mode}"] = run_json(
                py + [os.path.join(PEERS, f"{engine}_bench.py"), "w4", "--runs", n,
                      "--transitions", t, "--reps", r, "--mode", mode, "--variant", "threads"],
                f"{engine} {mode}")
    return out


def w5(py: list[str], claij: list[str], size: dict) -> dict:
    log("W5 MCP")
    script = os.path.join(PEERS, "mcp_bench.py")
    server = os.environ.get("CLAIJ_BENCH_MCP_SERVER", "")
    if not server or not os.path.exists(server):
        return {"skipped": "the MCP server (@modelcontextprotocol/server-everything) is not "
                           "installed; bench/run installs it with npm"}
    reps, calls = str(size["reps"]), "200" if size["reps"] > 1 else "20"
    out = {"claij": run_json(claij + ["w5", "--server", server, "--reps", reps, "--calls", calls],
                             "claij")}
    try:
        out["python_sdk"] = run_json(py + [script, "--server", server, "--reps", reps,
                                           "--calls", calls], "Python SDK")
    except SystemExit as e:
        out["python_sdk_failed"] = str(e)
    return out


# ---------------------------------------------------------------- the report


def fit(points: list[tuple[float, float]]) -> dict:
    """Least squares bytes = fixed + per_step × steps, and how far the worst point is
    from the line (as a fraction of its value)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    fixed = my - slope * mx
    worst = max(abs(y - (fixed + slope * x)) / y for x, y in zip(xs, ys) if y) if ys else 0.0
    return {"per_step": slope, "fixed": fixed, "worst_deviation": worst}


def ratio(peer: float, claij: float) -> float:
    return peer / claij if claij else float("inf")


def fmt_us(v: float) -> str:
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def fmt_x(v: float) -> str:
    return f"{v:,.1f}×" if v < 10 else f"{v:,.0f}×"


def fmt_bytes(v: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= size:
            return f"{v / size:,.1f} {unit}"
    return f"{v:,.0f} B"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def verdicts(res: dict) -> list[dict]:
    out = []

    def target(name, figure, goal, met, note=""):
        out.append({"target": name, "measured": figure, "goal": goal, "met": bool(met),
                    "note": note})

    w = res["workloads"]
    if "w1" in w:
        c = w["w1"]["claij"]["median_us_per"]
        lg = ratio(w["w1"]["langgraph_validate_on"]["median_us_per"], c)
        bu = ratio(w["w1"]["burr_validate_on"]["median_us_per"], c)
        target("W1 vs LangGraph (validation on)", fmt_x(lg), "≥200×", lg >= TARGETS["w1_langgraph"])
        target("W1 vs Burr (validation on)", fmt_x(bu), "≥40×", bu >= TARGETS["w1_burr"])
    if "w2" in w:
        d = w["w2"]
        strict, normal = d["claij_strict"]["median_us_per"], d["claij_normal"]["median_us_per"]
        fs = d["fsync"]["fdatasync_median_us"]
        lg = d["langgraph"]["median_us_per"]
        target("W2 strict vs one fsync per transition", f"{strict / fs:.1f}× ({fmt_us(strict)} µs vs {fmt_us(fs)} µs)",
               "≤1.5×", strict <= TARGETS["w2_strict_fsync"] * fs)
        target("W2 strict vs LangGraph", fmt_x(ratio(lg, strict)), "≥5×",
               ratio(lg, strict) >= TARGETS["w2_strict_langgraph"])
        target("W2 normal vs LangGraph", fmt_x(ratio(lg, normal)), "≥30×",
               ratio(lg, normal) >= TARGETS["w2_normal_langgraph"])
    if "w3" in w:
        g = res["derived"]["w3"]["claij"]
        target("W3 claij linear", f"worst point {g['file']['worst_deviation']:.1%} off a line",
               "linear", g["file"]["worst_deviation"] < 0.05 and g["rows"]["worst_deviation"] < 0.05)
        rr = g["rows_per_step_vs_event"]
        target("W3 claij bytes vs event bytes", f"{rr:.2f}× per step (rows), "
               f"{g['file_per_step_vs_event']:.2f}× (file)", "≤1.2× + fixed",
               rr <= TARGETS["w3_event_ratio"],
               "rows: RunStore::run_bytes (the stored text); file: SQLite file growth, pages and indexes included")
    if "w5" in w and "python_sdk" in w["w5"]:
        c, p = w["w5"]["claij"]["call_us"], w["w5"]["python_sdk"]["call_us"]
        target("W5 tools/call round trip vs the Python SDK", f"{c / p:.2f}× ({fmt_us(c)} µs vs {fmt_us(p)} µs)",
               "≤0.75×", c <= TARGETS["w5_call_ratio"] * p)
    if "w4" in w:
        d = w["w4"]
        for mode in ("seq", "concurrent"):
            x = ratio(d[f"claij_{mode}"]["runs_per_s"], d[f"langgraph_{mode}"]["runs_per_s"])
            target(f"W4 runs/s vs LangGraph ({'sequential' if mode == 'seq' else 'concurrent'})",
                   fmt_x(x), "≥100×", x >= TARGETS["w4_langgraph"])
        mem_keys = sorted(k for k in d if k.startswith("claij_mem_at_"))
        worst = max(d[k]["bytes_per_run"] for k in mem_keys)
        target("W4 memory per in-memory run", " / ".join(
            f"{d[k]['bytes_per_run'] / 1024:.1f} KiB (held at transition {d[k]['held_at_transition']})"
            for k in mem_keys), "≤8 KiB", worst <= TARGETS["w4_bytes_per_run"])
    return out


def derive(res: dict) -> dict:
    w = res["workloads"]
    out = {}
    if "w3" in w:
        d = w["w3"]
        c = d["claij"]["points"]
        rows = fit([(p["steps"], p["run_bytes"]) for p in c])
        file = fit([(p["steps"], p["file_bytes"]) for p in c])
        events = fit([(p["steps"], p["event_bytes"]) for p in c])
        out["w3"] = {"claij": {
            "rows": rows, "file": file, "events": events,
            "rows_per_step_vs_event": rows["per_step"] / events["per_step"],
            "file_per_step_vs_event": file["per_step"] / events["per_step"],
        }}
        for key in ("langgraph_default", "langgraph_delta", "burr_default"):
            pts = d[key]["points"]
            out["w3"][key] = {"file": fit([(p["steps"], p["file_bytes"]) for p in pts])}
    return out


def report(res: dict) -> str:
    m, w = res["machine"], res["workloads"]
    d = m["disk"]
    lines = [
        f"claij benchmark ({res['mode']}), {res['started']}",
        f"machine: {m['cores']} cores, {m['cpu']}, {m['memory_gib']} GiB memory, "
        f"disk {d['device']} ({d['fs']}, rotational={d.get('rotational', '?')}, "
        f"{d['size_gib']} GiB) holding {d['dir']}; load at start {m['load_at_start'][0]:.2f}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()
                                  if k != "claij-bench"),
        f"each figure: the median of {res['size']['reps']} repetition(s) after a warm-up; "
        "ratio = peer's time / claij's (how many times faster claij is)",
        "",
    ]
    if "w1" in w:
        d1 = w["w1"]
        c = d1["claij"]["median_us_per"]
        rows = []
        for v in ("on", "off"):
            lg = d1[f"langgraph_validate_{v}"]["median_us_per"]
            bu = d1[f"burr_validate_{v}"]["median_us_per"]
            rows.append([f"peers' jsonschema validation {v}", fmt_us(c), fmt_us(lg), fmt_x(ratio(lg, c)),
                         fmt_us(bu), fmt_x(ratio(bu, c))])
        lines += [f"W1 in memory: {d1['claij']['transitions']:,}-transition ping-pong loop, "
                  f"µs per transition (claij always validates; a claij repetition is "
                  f"{d1['claij'].get('runs_per_rep', 1)} runs, a peer's one)",
                  table(rows, ["", "claij", "LangGraph", "ratio", "Burr", "ratio"]), ""]
    if "w2" in w:
        d2 = w["w2"]
        lg, bu = d2["langgraph"]["median_us_per"], d2["burr"]["median_us_per"]
        rows = []
        for dur, promise in (("strict", "synchronous=FULL: survives power loss, as the peers"),
                             ("normal", "synchronous=NORMAL: survives a crash of the process")):
            c = d2[f"claij_{dur}"]["median_us_per"]
            rows.append([f"claij {dur} ({promise})", fmt_us(c), fmt_us(lg), fmt_x(ratio(lg, c)),
                         fmt_us(bu), fmt_x(ratio(bu, c))])
        fs = d2["fsync"]
        lines += [f"W2 durable: the same loop, {d2['langgraph']['transitions']:,} transitions, "
                  "a SQLite checkpoint committed at every step, µs per transition",
                  table(rows, ["", "claij", "LangGraph", "ratio", "Burr", "ratio"]),
                  f"peers: LangGraph SqliteSaver, durability=\"sync\" ({d2['langgraph']['journal_mode']} "
                  f"journal, synchronous={d2['langgraph']['synchronous']}, "
                  f"{d2['langgraph']['checkpoints_per_run'] / d2['langgraph']['transitions']:.2f} checkpoints "
                  f"per transition); Burr SQLitePersister ({d2['burr']['journal_mode']} journal, "
                  f"synchronous={d2['burr']['synchronous']})",
                  f"one fsync on this disk (4 KiB append, median of {fs['samples']}): "
                  f"fdatasync {fmt_us(fs['fdatasync_median_us'])} µs, fsync {fmt_us(fs['fsync_median_us'])} µs; "
                  f"claij strict = {d2['claij_strict']['median_us_per'] / fs['fdatasync_median_us']:.1f}× one fdatasync",
                  ""]
    if "w3" in w:
        d3 = w["w3"]
        der = res["derived"]["w3"]
        cp = d3["claij"]["points"]
        rows = []
        for i, p in enumerate(cp):
            rows.append([f"{p['steps']}", fmt_bytes(p["chunk_bytes"]), fmt_bytes(p["event_bytes"]),
                         fmt_bytes(p["run_bytes"]), fmt_bytes(p["file_bytes"]),
                         fmt_bytes(d3["langgraph_default"]["points"][i]["file_bytes"]),
                         fmt_bytes(d3["langgraph_delta"]["points"][i]["file_bytes"]),
                         fmt_bytes(d3["burr_default"]["points"][i]["file_bytes"])])
        cl = der["claij"]
        lines += ["W3 growth: every step appends 1 KiB to the history; bytes stored after N steps",
                  table(rows, ["steps", "appended", "claij events", "claij rows", "claij file",
                               "LangGraph file", "LangGraph delta", "Burr file"]),
                  f"claij: rows {fmt_bytes(cl['rows']['per_step'])}/step + {fmt_bytes(cl['rows']['fixed'])} "
                  f"fixed = {cl['rows_per_step_vs_event']:.2f}× the events' {fmt_bytes(cl['events']['per_step'])}/step; "
                  f"file {fmt_bytes(cl['file']['per_step'])}/step + {fmt_bytes(cl['file']['fixed'])} fixed "
                  f"= {cl['file_per_step_vs_event']:.2f}× (worst point {cl['file']['worst_deviation']:.1%} off the line)",
                  "claij keeps the history in its trail (each event carries its chunk; actions see the "
                  "trail); LangGraph: Annotated[list, operator.add] (the documented reducer), and the "
                  "beta DeltaChannel; Burr: state.append. Files: SQLite file growth after a WAL checkpoint.",
                  ""]
    if "w4" in w:
        d4 = w["w4"]
        rows = []
        for mode, label in (("seq", "sequential"), ("concurrent", "concurrent")):
            c = d4[f"claij_{mode}"]
            lg, bu = d4[f"langgraph_{mode}"], d4[f"burr_{mode}"]
            rows.append([f"{label} runs/s", f"{c['runs_per_s']:,.0f}", f"{lg['runs_per_s']:,.0f}",
                         fmt_x(ratio(c["runs_per_s"], lg["runs_per_s"])), f"{bu['runs_per_s']:,.0f}",
                         fmt_x(ratio(c["runs_per_s"], bu["runs_per_s"]))])
            rows.append([f"{label} peak RSS", fmt_bytes(c["peak_rss_kib"] * 1024),
                         fmt_bytes(lg["peak_rss_kib"] * 1024), "", fmt_bytes(bu["peak_rss_kib"] * 1024), ""])
        mem = [d4[k] for k in sorted(d4) if k.startswith("claij_mem_at_")]
        lines += [f"W4 many runs: {d4['claij_seq']['runs']:,} in-memory runs of "
                  f"{d4['claij_seq']['transitions']} transitions (ratio = claij's runs/s / peer's)",
                  table(rows, ["", "claij", "LangGraph", "ratio", "Burr", "ratio"]),
                  f"concurrent: claij {d4['claij_concurrent']['concurrency']}; LangGraph "
                  f"{d4['langgraph_concurrent']['concurrency']}; Burr {d4['burr_concurrent']['concurrency']}",
                  "claij memory per live in-memory run ("
                  + "; ".join(f"{x['runs']:,} runs held at transition {x['held_at_transition']}: "
                              f"{x['bytes_per_run'] / 1024:.1f} KiB" for x in mem) + ")",
                  ""]
    if "w5" in w:
        d5 = w["w5"]
        if "skipped" in d5:
            lines += [f"W5 MCP: skipped: {d5['skipped']}", ""]
        else:
            c = d5["claij"]
            p = d5.get("python_sdk")
            peer = (lambda key, fmt: fmt(p[key])) if p else (lambda key, fmt: "failed")
            rows = [["spawn to ready", f"{c['spawn_to_ready_ms']:,.1f} ms",
                     peer("spawn_to_ready_ms", lambda v: f"{v:,.1f} ms"),
                     fmt_x(p["spawn_to_ready_ms"] / c["spawn_to_ready_ms"]) if p else ""],
                    ["tools/call get-sum round trip", f"{c['call_us']:,.0f} µs",
                     peer("call_us", lambda v: f"{v:,.0f} µs"),
                     fmt_x(p["call_us"] / c["call_us"]) if p else ""]]
            lines += ["W5 MCP: @modelcontextprotocol/server-everything over stdio (ratio = Python SDK / claij)",
                      table(rows, ["", "claij", f"Python SDK (mcp {res['versions'].get('mcp', '?')})", "ratio"]),
                      "ready: claij after initialize and listing the tools, resources and prompts; "
                      "the Python SDK after initialize only",
                      ""]
    lines.append("targets (issue 9):")
    for t in res["targets"]:
        lines.append(f"  [{'met' if t['met'] else 'NOT met'}] {t['target']}: {t['measured']} (goal {t['goal']})")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    p.add_argument("--claij", required=True, help="the claij-bench binary")
    p.add_argument("--dir", required=True, help="where the SQLite files go (on the disk to measure)")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument("--only", default="w1,w2,w3,w4,w5", help="workloads to run")
    args = p.parse_args()
    size = SMOKE if args.smoke else FULL
    os.makedirs(args.dir, exist_ok=True)
    claij, py = [args.claij], [sys.executable]
    only = set(args.only.split(","))
    res = {
        "mode": "smoke" if args.smoke else "full",
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(args.dir),
        "versions": versions(args.claij),
        "size": size,
        "workloads": {},
    }
    started = time.perf_counter()
    w = res["workloads"]
    if "w1" in only:
        w["w1"] = w1(claij, py, size)
    if "w2" in only:
        w["w2"] = w2(claij, py, size, args.dir)
    if "w3" in only:
        w["w3"] = w3(claij, py, size, args.dir)
    if "w4" in only:
        w["w4"] = w4(claij, py, size)
    if "w5" in only:
        w["w5"] = w5(py, claij, size)
    res["machine"]["load_at_end"] = os.getloadavg()
    res["elapsed_s"] = round(time.perf_counter() - started, 1)
    res["derived"] = derive(res)
    res["targets"] = verdicts(res)
    text = report(res)
    res["report"] = text
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(text)
    print(f"\n(written to {args.out}; {res['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
