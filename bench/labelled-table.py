"""The labelled set's table (bench/labelled-set): claij vs plain per part, category and model.

Usage: labelled-table.py SUMMARY.md PART:CATEGORY:REPORT.json...

Each report is one `claij eval --baseline plain --json` of a category; its rows named
`MODEL (plain)` are the plain baseline of MODEL. Prints and writes (to SUMMARY.md) one row
per part, category and model, then one per part and model over its categories, and names
every category where claij is below plain.
"""

import json
import os
import sys

PLAIN = " (plain)"


def stats(model_row, results):
    ms = sum(r.get("latency_ms") or 0 for r in results)
    runs = model_row["runs"]
    steps = model_row["model_steps"]
    return {
        "passed": model_row["passed"],
        "runs": runs,
        "first": model_row["first_try_valid"],
        "steps": steps,
        "attempts": model_row["model_attempts"],
        "ms": ms,
    }


def add(total, s):
    for k, v in s.items():
        total[k] = total.get(k, 0) + v


def cell(s):
    if not s or not s["runs"]:
        return "—", "—", "—", "—"
    rate = s["passed"] / s["runs"]
    first = s["first"] / s["steps"] if s["steps"] else 0
    att = s["attempts"] / s["steps"] if s["steps"] else 0
    return (f'{s["passed"]}/{s["runs"]} ({rate:.0%})', f"{first:.0%}", f"{att:.2f}",
            f'{s["ms"] / 1000 / s["runs"]:.1f}')


def main():
    summary, args = sys.argv[1], sys.argv[2:]
    rows = []  # (part, category, model, claij stats, plain stats, rss MiB)
    for arg in args:
        part, category, path = arg.split(":", 2)
        if not os.path.exists(path):
            print(f"labelled-table: {part}/{category}: no report ({path})", file=sys.stderr)
            continue
        report = json.load(open(path))
        rss = 0
        rss_path = path[: -len(".json")] + ".rss"
        if os.path.exists(rss_path):
            for line in open(rss_path):
                if line.startswith("peak-rss-kb"):
                    rss = int(line.split()[1]) // 1024
        by_model = {}
        for m in report["models"]:
            results = [r for r in report["results"] if r.get("model") == m["model"]]
            name = m["model"]
            plain = name.endswith(PLAIN)
            base = name[: -len(PLAIN)] if plain else name
            by_model.setdefault(base, {})["plain" if plain else "claij"] = stats(m, results)
        for model, s in by_model.items():
            rows.append((part, category, model, s.get("claij"), s.get("plain"), rss))

    head = ("| part | category | model | claij | plain | first-try valid (claij/plain) "
            "| attempts/step (claij/plain) | s/case (claij/plain) | peak memory |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    totals = {}
    below = []
    for part, category, model, c, p, rss in rows:
        cc, pc = cell(c), cell(p)
        lines.append(f"| {part} | {category} | {model} | {cc[0]} | {pc[0]} | {cc[1]} / {pc[1]} "
                     f"| {cc[2]} / {pc[2]} | {cc[3]} / {pc[3]} | {rss} MiB |")
        t = totals.setdefault((part, model), [{}, {}, 0])
        if c:
            add(t[0], c)
        if p:
            add(t[1], p)
        t[2] = max(t[2], rss)
        if c and p and c["passed"] * p["runs"] < p["passed"] * c["runs"]:
            below.append(f"{part}/{category} on {model}")
    for (part, model), (c, p, rss) in totals.items():
        cc, pc = cell(c), cell(p)
        lines.append(f"| **{part}** | **all** | {model} | **{cc[0]}** | **{pc[0]}** "
                     f"| {cc[1]} / {pc[1]} | {cc[2]} / {pc[2]} | {cc[3]} / {pc[3]} | {rss} MiB |")
    text = "\n".join(lines) + "\n"
    if below:
        text += "\nclaij below plain: " + ", ".join(below) + "\n"
    elif any(r[4] for r in rows):
        text += "\nclaij at or above plain on every category and model.\n"
    open(summary, "w").write(text)
    print()
    print(text, end="")
    print(f"(written to {summary})")


if __name__ == "__main__":
    main()
