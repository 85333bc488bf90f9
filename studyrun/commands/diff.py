"""`studyrun diff`: what changed between two results folders, or between a study file and a git
revision of it: the study's blocks key by key, the runs the two share by identity, and every
number of `results` that moved (with the interval the analysis gives beside it, where it gives
one: a key `X_conf` beside `X`, as Sobol' and Morris results have).

`--fail-above TOL` makes a pipeline's guard: exit 1 when a result moved by more than TOL, or by
more than its intervals allow.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from studyrun.core.errors import StudyrunError

BLOCKS = ("name", "seed", "model", "parameters", "quantities", "correlation", "analysis",
          "execution")


@dataclass
class Moved:
    """One number of `results` in both: where, before, after, and its interval (half-widths)."""

    key: str
    before: float | None
    after: float | None
    interval: float | None = None  # the two intervals' half-widths added; None: none given

    @property
    def change(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    def beyond(self, tolerance: float | None) -> bool:
        """Moved by more than the tolerance, or by more than its intervals allow; or appeared,
        vanished or became NaN or infinite (a number on one side only), which no tolerance
        allows."""
        change = self.change
        if change is None or not math.isfinite(change):
            return True  # result_changes lists no pair that is the same on both sides
        if self.interval is not None and abs(change) > self.interval:
            return True
        return tolerance is not None and abs(change) > tolerance


@dataclass
class Difference:
    """What `studyrun diff` reports."""

    a: str
    b: str
    study: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # block -> changes
    runs: dict[str, int] = field(default_factory=dict)
    results: list[Moved] = field(default_factory=list)
    compared: int = 0  # numbers of results compared
    notes: list[str] = field(default_factory=list)

    def moved(self, tolerance: float | None) -> list[Moved]:
        return [m for m in self.results if m.beyond(tolerance)]

    def as_json(self, tolerance: float | None) -> dict[str, Any]:
        """What --json prints: strict JSON (NaN and infinities as null, `non_finite` saying
        which were which; a value JSON has no type for, a YAML date, as text)."""
        return {"a": self.a, "b": self.b, "runs": self.runs, "tolerance": tolerance,
                "study": {block: [flagged({"key": c["key"], "a": c.get("a"), "b": c.get("b")})
                                  for c in items] for block, items in self.study.items()},
                "results": {"compared": self.compared, "changed": [
                    flagged({"key": m.key, "a": m.before, "b": m.after, "change": m.change,
                             "interval": m.interval, "beyond": m.beyond(tolerance)})
                    for m in self.results]},
                "notes": self.notes}

    def as_text(self, tolerance: float | None) -> str:
        lines = [f"a: {self.a}", f"b: {self.b}", ""]
        changes = [c for items in self.study.values() for c in items]
        lines.append("study: the same" if not changes else f"study: {len(changes)} change(s)")
        for change in changes:
            lines.append(f"  {change['key']}: {show(change.get('a'))} -> {show(change.get('b'))}")
        if self.runs:
            r = self.runs
            lines += ["", f"runs: a {r['a']:,}, b {r['b']:,}, shared by identity {r['shared']:,}"]
        if self.compared:
            lines += ["", f"results: {len(self.results)} of {self.compared} numbers changed"
                      + (f", {len(self.moved(tolerance))} beyond the tolerance {tolerance:g} "
                         "or their intervals" if tolerance is not None else "")]
            for pattern, group in grouped(self.results):
                lines += [described(m, tolerance) for m in group] if len(group) <= LISTED else [
                    summarised(pattern, group, tolerance)]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def flagged(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry of --json with its non-finite numbers as null and named in `non_finite`
    ("NaN", "Infinity", "-Infinity"), at any depth of its values."""
    found: dict[str, str] = {}

    def clean(value: Any, where: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            found[where] = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return None
        if isinstance(value, dict):
            return {str(k): clean(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{where}.{i}") for i, v in enumerate(value)]
        if value is None or isinstance(value, (str, int, float)):
            return value
        return str(value)

    out = {key: clean(value, key) for key, value in entry.items()}
    return out | ({"non_finite": found} if found else {})


LISTED = 10  # changed numbers of one list (same key but for the items' indices) shown one by one


def described(m: Moved, tolerance: float | None) -> str:
    detail = ([] if m.change is None else [f"{m.change:+.6g}"]) + (
        [] if m.interval is None else [f"intervals allow {m.interval:.3g}"])
    flag = "  BEYOND" if tolerance is not None and m.beyond(tolerance) else ""
    return (f"  {m.key}: {show(m.before)} -> {show(m.after)}"
            + (f" ({'; '.join(detail)})" if detail else "") + flag)


def summarised(pattern: str, group: list[Moved], tolerance: float | None) -> str:
    """One line for many changed numbers of a list (every candidate an optimisation evaluated)."""
    changes = [abs(m.change) for m in group if m.change is not None]
    beyond = sum(m.beyond(tolerance) for m in group) if tolerance is not None else 0
    return (f"  {pattern}: {len(group):,} numbers changed"
            + (f", the largest by {max(changes):.6g}" if changes else "")
            + (f"  BEYOND: {beyond:,}" if beyond else "") + " (--json lists each)")


def grouped(moved: list[Moved]) -> list[tuple[str, list[Moved]]]:
    """The changed numbers by their key with list indices as *, in order of first appearance."""
    groups: dict[str, list[Moved]] = {}
    for m in moved:
        pattern = ".".join("*" if part.isdigit() else part for part in m.key.split("."))
        groups.setdefault(pattern, []).append(m)
    return list(groups.items())


def natural(key: str) -> tuple:
    """A dotted key's sort order with list indices as numbers: x.2 before x.10."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in key.split("."))


def show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def diff_folders(a: Path, b: Path) -> Difference:
    """Two results folders: their study.yaml, stores and analysis.json."""
    from studyrun.results.outputs import read_analysis

    first, second = read_analysis(Path(a)), read_analysis(Path(b))
    found = Difference(str(a), str(b))
    found.study = study_changes(folder_study(Path(a)), folder_study(Path(b)))
    stored = [stored_context(Path(folder) / "runs.sqlite") for folder in (a, b)]
    with_files(found, *(context[1] for context in stored))
    ids = [context[0] for context in stored]
    found.runs = {"a": len(ids[0]), "b": len(ids[1]), "shared": len(set(ids[0]) & set(ids[1]))}
    found.results, found.compared = result_changes(first["results"], second["results"])
    return found


def folder_study(folder: Path) -> dict[str, Any]:
    """A results folder's study.yaml through the study reader (bounded nesting and aliases:
    the folder may come from elsewhere); empty when the folder has none."""
    from studyrun.study.source import read_yaml as read_source

    if not (folder / "study.yaml").is_file():
        return {}
    data = read_source(folder / "study.yaml").data
    return data if isinstance(data, dict) else {}


def diff_revision(study: Path, revision: str, results: Path | None = None) -> Difference:
    """A study file against itself at a git revision (the files it names at that revision: its
    model file and module, data): the study's changes and the planned runs they share, found
    without running anything of either version; and, given the current study's results folder,
    the revision's results too: its study is run into a temporary folder seeded with that
    folder's runs (those of the same identity are reused), and every result that moved is
    listed. The results folder is only read."""
    from studyrun.study.revision import check_out

    study = Path(study).resolve()
    with tempfile.TemporaryDirectory(prefix="studyrun-diff-") as folder:
        checkout = check_out(study, revision, Path(folder) / "tree")
        relative = checkout.study.relative_to(checkout.folder)
        found = Difference(f"{relative} at {revision}", str(relative))
        old = checkout.study
        found.study = study_changes(resolved_source(old), resolved_source(study))
        plans = [planned(path, label) for path, label in ((old, f"at {revision}"), (study, "now"))]
        with_files(found, *(plan.files for plan in plans))
        if all(plan.ids is not None for plan in plans):
            ids = [plan.ids for plan in plans]
            found.runs = {"a": len(ids[0]), "b": len(ids[1]), "shared": len(set(ids[0]) & set(ids[1]))}
        found.notes += checkout.notes + list(dict.fromkeys(plan.note for plan in plans if plan.note))
        if results is None:
            found.notes.append("give the study's results folder (--results DIR) to compare "
                               "results too: the revision's study (its model's code) is then run "
                               "beside it")
            return found
        from studyrun.results.outputs import read_analysis

        current = read_analysis(Path(results))
        made_by = current.get("provenance", {}).get("study_sha256")
        if made_by and made_by != hashlib.sha256(study.read_bytes()).hexdigest():
            found.notes.append(f"{results} was made by another version of the study file: its "
                               "results are not the current study's (run the study again, then "
                               "compare)")
        earlier = run_revision(old, Path(results), Path(folder) / "revision-results")
        found.b = f"{relative} (results in {results})"
        found.results, found.compared = result_changes(read_analysis(earlier)["results"],
                                                       current["results"])
        reused = read_analysis(earlier)["runs"].get("reused", 0)
        found.notes.append(f"the revision's study was run for this comparison, reusing {reused:,} "
                           f"runs of {results}")
    return found


@dataclass
class Planned:
    """One side of a revision's comparison: its planned run identities and the files its runs
    depend on (None where the study could not be planned, with a note saying why)."""

    ids: list[int] | None
    files: dict[str, str] | None
    note: str = ""


NOT_RUN = ("the model was not imported or translated, as that runs its code: a python model's "
           "files are its module and the modules its import statements name (a module imported "
           "by a name made at run time is not seen)")


def planned(path: Path, label: str) -> Planned:
    """The study's runs and files, found without running any of its code."""
    from studyrun.plan.study import plan_study
    from studyrun.study.loading import load_study

    try:
        loaded = load_study(path, run_code=False)
        files = loaded.dependencies()
        plan = plan_study(loaded)
    except StudyrunError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        return Planned(None, None, f"the study {label} could not be planned, so its runs are not "
                                   f"compared: {first}")
    note = ("runs are those the first round plans (an iterative analysis plans its first run "
            "only)" if loaded.study.analysis.iterative else "")
    if loaded.study.model_spec.runs_code_to_check:
        note = "; ".join(filter(None, [NOT_RUN, note]))
    return Planned(plan.run_ids.tolist(), files, note)


def resolved_source(path: Path) -> dict[str, Any]:
    """The study as a run's study.yaml keeps it: the model file it names inlined."""
    from studyrun.study.loading import include_files
    from studyrun.study.source import read_yaml as read_source

    try:
        data = include_files(read_source(path)).data
    except StudyrunError:
        return read_yaml(path)  # what can be read of it; planning it says what is wrong
    return data if isinstance(data, dict) else {}


def with_files(found: Difference, a: dict[str, str] | None, b: dict[str, str] | None) -> None:
    """The files the runs depend on (the model's module and what it imports, data files) whose
    contents differ, as the study's `files` block: each side's SHA-256, shortened."""
    if a is None or b is None:
        return
    changed = [{"key": f"files.{name}", "a": a[name][:12] if name in a else None,
                "b": b[name][:12] if name in b else None}
               for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
    if changed:
        found.study["files"] = changed


def run_revision(study: Path, results: Path, out: Path) -> Path:
    """`studyrun run` of the revision's study into `out`, its store first a copy of the results
    folder's (so runs of the same identity are reused); with a store of its own when the two
    studies' runs cannot share one (other parameters or quantities). The store's files are
    copied as they are, not opened where they are: SQLite would make (and remove) its journal
    files in the results folder, and nothing is written there."""
    import os
    import shutil
    import sys

    def run() -> subprocess.CompletedProcess:
        # no __pycache__ written beside a module the working tree lends the revision; no
        # report drawn in a temporary folder nobody opens (it cost a second a diff)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        return subprocess.run([sys.executable, "-m", "studyrun", "run", str(study), "--out",
                               str(out), "--quiet", "--no-report"], cwd=study.parent,
                              capture_output=True, text=True, env=env)

    out.mkdir(parents=True, exist_ok=True)
    if not (results / "runs.sqlite").is_file():
        raise StudyrunError(f"{results}: no runs.sqlite here; give the study's results folder "
                            "(results/<name>, or the --out of its run)")
    for name in ("runs.sqlite", "runs.sqlite-wal"):  # runs the journal holds are in its copy
        if (results / name).is_file():
            shutil.copyfile(results / name, out / name)
    done = run()
    if done.returncode != 0:  # the copied store refused: the revision's study on its own
        for leftover in out.glob("runs.sqlite*"):
            leftover.unlink()
        done = run()
    if done.returncode != 0:
        raise StudyrunError(f"the study at that revision did not run:\n"
                            f"{done.stderr.strip()[-2000:]}")
    return out


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise StudyrunError(f"{path}: cannot read it as a study ({error})") from None
    return data if isinstance(data, dict) else {}


def study_changes(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per block, each key that differs: dotted path, its value in a and in b (absent: None)."""
    blocks = [k for k in BLOCKS if k in a or k in b] + sorted(
        (set(a) | set(b)) - set(BLOCKS) - {"description"})
    changes: dict[str, list[dict[str, Any]]] = {}
    for block in blocks:
        left, right = flatten(a.get(block), block), flatten(b.get(block), block)
        items = [{"key": k, "a": left.get(k), "b": right.get(k)}
                 for k in sorted(set(left) | set(right), key=lambda k: (k not in left, k))
                 if left.get(k) != right.get(k)]
        if items:
            changes[block] = items
    return changes


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """Leaves of nested mappings by dotted path (lists are leaves)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= flatten(item, f"{prefix}.{key}")
        return out
    return {} if value is None else {prefix: value}


def numbers(value: Any, prefix: str = "") -> dict[str, float | None]:
    """Every number (or null) of `results` by dotted path; list items by index."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value))
    elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return {prefix: None if value is None else float(value)}
    else:
        return {}
    out: dict[str, float | None] = {}
    for key, item in items:
        out |= numbers(item, f"{prefix}.{key}" if prefix else str(key))
    return out


def result_changes(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[Moved], int]:
    """The numbers that differ between two `results` blocks, each with its intervals where a
    key X_conf stands beside X (at the same place below it), and how many were compared."""
    left, right = numbers(a), numbers(b)
    keys = sorted(set(left) | set(right), key=natural)
    moved = []
    for key in keys:
        before, after = left.get(key), right.get(key)
        if before == after or (before is not None and after is not None
                               and math.isnan(before) and math.isnan(after)):
            continue
        half = [conf(values, key) for values in (left, right)]
        interval = None if None in half else sum(h for h in half if h is not None)
        moved.append(Moved(key, before, after, interval))
    return moved, len(keys)


def conf(values: dict[str, float | None], key: str) -> float | None:
    """The half-width beside a result: the same path with one part X as X_conf."""
    parts = key.split(".")
    for i in range(len(parts) - 1, -1, -1):
        candidate = ".".join(parts[:i] + [parts[i] + "_conf"] + parts[i + 1:])
        if candidate in values:
            value = values[candidate]
            return None if value is None or math.isnan(value) else abs(value)
    return None


def stored_context(path: Path) -> tuple[list[int], dict[str, str] | None]:
    """A store's recorded run identities and the files its latest runs depended on."""
    from studyrun.store.run_store import RunStore, latest_identity

    with RunStore.open_readonly(path) as store:
        context = latest_identity(store.db)
        return store.recorded_ids().tolist(), None if context is None else context.get("files")
