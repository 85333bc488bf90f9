"""benchmarks/measured/*.csv as Markdown tables: benchmarks/measured/summary.md.

    python benchmarks/summarize.py
"""

import csv
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "measured"
ORDER = ("core", "equations", "sobol", "peers", "parallel", "scaling")
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
    (RESULTS / "summary.md").write_text("\n".join(parts))
    print(f"wrote {RESULTS / 'summary.md'}")


if __name__ == "__main__":
    main()
