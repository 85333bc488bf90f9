"""benchmarks/measured/*.csv as Markdown tables: benchmarks/measured/summary.md.

    python benchmarks/summarize.py
"""

import csv
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "measured"
ORDER = ("core", "equations", "sobol", "peers", "command", "command-scratch", "parallel", "scaling",
         "gradient")
COLUMNS = ("measure", "target", "measured", "unit", "meets", "command")


def table(path: Path) -> str:
    rows = list(csv.DictReader(path.open()))
    extra = [k for k in rows[0] if k not in COLUMNS] if rows else []
    head = [c for c in COLUMNS if rows and c in rows[0]] + ["details"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        details = ", ".join(f"{k} {row[k]}" for k in extra if row.get(k) not in (None, ""))
        cells = [row.get(c, "") for c in head[:-1]] + [details]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parts = []
    for name in ORDER:
        path = RESULTS / f"{name}.csv"
        if path.exists():
            parts.append(f"### {name}\n\n{table(path)}\n")
    if (RESULTS / "parallel.csv").exists():
        parts.append(f"### parallel, side by side\n\n{parallel_pivot()}\n")
    (RESULTS / "summary.md").write_text("\n".join(parts))
    print(f"wrote {RESULTS / 'summary.md'}")




def parallel_pivot() -> str:
    """measured/parallel.csv as one line per model, executor and cost: 1 and 2 workers side by side."""
    path = RESULTS / "parallel.csv"
    rows = [r for r in csv.DictReader(path.open()) if r.get("workers")]
    cases: dict = {}
    for r in rows:
        cases.setdefault((r.get("model", "busy"), r["mode"], float(r["cost_ms"])), {})[
            int(r["workers"])] = r
    lines = ["| model | executor | ms/run | 1 worker: runs/s (efficiency) | 2 workers: runs/s "
             "(efficiency) | speed-up | start-up to first worker run (1 / 2 workers) |",
             "|---|---|---|---|---|---|---|"]
    for (model, mode, cost), by in sorted(cases.items()):
        if 1 not in by or 2 not in by:
            continue
        one, two = by[1], by[2]
        speed = float(two["measured"]) / float(one["measured"])
        lines.append(f"| {model} | {'LocalCluster' if mode == 'local' else 'dask scheduler'} | "
                     f"{cost:g} | {float(one['measured']):.4g} ({one['efficiency']}) | "
                     f"{float(two['measured']):.4g} ({two['efficiency']}) | {speed:.2f}x | "
                     f"{one['startup_s']} s / {two['startup_s']} s |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
