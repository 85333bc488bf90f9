"""The whole path from study file to results folder, with known answers and real executors."""

from __future__ import annotations

import json
import math
from importlib import metadata

import numpy as np
import pytest
from conftest import run_cli, write_study

import studyrun
from studyrun.results.provenance import PACKAGES

LINEAR_MC = """
name: linear-mc
seed: 42
model: {type: python, function: "linear:linear", vectorized: true}
parameters:
  a: {distribution: uniform, low: 0, high: 1}
  b: {distribution: normal, mean: 1, std: 0.5}
  c: 4
quantities: {y: y, a2: a_squared}
analysis: {type: montecarlo, samples: 20000, sampling: sobol}
"""


@pytest.mark.slow
def test_montecarlo_of_a_linear_model_matches_its_moments(study_dir):
    result = studyrun.run(write_study(study_dir, LINEAR_MC), study_dir / "out")
    y = result.results["y"]
    # y = 2a - 3b + 4 with a ~ U(0,1), b ~ N(1, 0.5): mean 2, variance 4/12 + 9/4
    assert y["mean"] == pytest.approx(2.0, abs=0.02)
    assert y["std"] == pytest.approx(math.sqrt(4 / 12 + 9 * 0.25), rel=0.01)
    assert result.results["a2"]["mean"] == pytest.approx(1 / 3, abs=0.005)
    assert y["correlations"]["b"] < -0.9
    assert result.analysis["runs"] == {"planned": 20000, "succeeded": 20000, "failed": 0, "reused": 0}
    frame = result.runs
    assert len(frame) == 20000 and {"a", "b", "y", "run.status"} <= set(frame.columns)
    assert (study_dir / "out" / "report.md").read_text().count("figures/") >= 2


@pytest.mark.slow
def test_rerun_reuses_every_run_and_fresh_starts_over(study_dir):
    path = write_study(study_dir, LINEAR_MC.replace("20000", "500"))
    first = studyrun.run(path, study_dir / "out", report=False)
    again = studyrun.run(path, study_dir / "out", report=False)
    assert again.analysis["runs"]["reused"] == 500
    assert again.results == first.results
    fresh = studyrun.run(path, study_dir / "out", fresh=True, report=False)
    assert fresh.analysis["runs"]["reused"] == 0 and fresh.results == first.results


@pytest.mark.slow
def test_more_samples_reuse_the_runs_already_made(study_dir):
    path = write_study(study_dir, LINEAR_MC.replace("20000", "256").replace("sobol", "random"))
    studyrun.run(path, study_dir / "out", report=False)
    write_study(study_dir, LINEAR_MC.replace("20000", "512").replace("sobol", "random"))
    bigger = studyrun.run(path, study_dir / "out", report=False)
    assert bigger.analysis["runs"]["reused"] == 256


SCALAR = """
name: scalar
seed: 3
model: {type: python, function: "linear:scalar_linear"}
parameters:
  a: {bounds: [0, 1]}
  b: {distribution: triangular, low: 0, mode: 0.2, high: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: 300, sampling: lhs}
execution: {batch_size: BATCH, scheduler: SCHEDULER, workers: 2}
"""


def run_scalar(study_dir, scheduler, batch, out):
    text = SCALAR.replace("BATCH", str(batch)).replace("SCHEDULER", scheduler)
    return studyrun.run(write_study(study_dir, text, f"{out}.yaml"), study_dir / out, report=False)


@pytest.mark.slow
def test_results_do_not_depend_on_scheduler_or_batch_size(study_dir, dask_scheduler):
    reference = run_scalar(study_dir, "sync", "auto", "sync")
    cases = [("threads", 1), ("threads", 7), ("local", 64), (dask_scheduler, 13)]
    for i, (scheduler, batch) in enumerate(cases):
        other = run_scalar(study_dir, scheduler, batch, f"out-{i}")
        assert other.results == reference.results, scheduler
        assert other.analysis["execution"]["scheduler"] == scheduler
        ids = other.runs.sort_values("run.index")["run.id"].tolist()
        assert ids == reference.runs.sort_values("run.index")["run.id"].tolist()


@pytest.mark.slow
def test_vectorized_model_receives_whole_batches(study_dir):
    text = LINEAR_MC.replace("20000", "1000") + "execution: {batch_size: 250, scheduler: sync}\n"
    result = studyrun.run(write_study(study_dir, text), study_dir / "out", report=False)
    assert result.runs["run.worker"].nunique() == 1
    assert result.analysis["execution"]["batch_size"] == 250


BATCH_COST = '''
import time
import numpy as np

def fixed(a):
    """A call costs 150 ms whatever its batch (an ensemble integrated together)."""
    time.sleep(0.15)
    return {"y": 2 * np.asarray(a)}

def per_run(a):
    time.sleep(0.002)
    return {"y": 2 * a}
'''


@pytest.mark.slow
@pytest.mark.parametrize("function, vectorized, batches", [("fixed", "true", (6, 12)),
                                                           ("per_run", "false", (8, 30))])
def test_the_batch_size_follows_how_a_batchs_cost_grows(study_dir, function, vectorized, batches):
    """A vectorized model whose call costs the same for 1 or 1,000 runs gets large batches (a
    pilot that stopped after its batches of 1 and 4 runs, 0.3 s, would give 150 ms / 4 runs,
    batches of 13: 150 of them, 23 s); runs of a fixed cost each get batches of about half a
    second, as before."""
    (study_dir / "cost.py").write_text(BATCH_COST)
    text = (f"name: cost\nmodel: {{type: python, function: 'cost:{function}', vectorized: "
            f"{vectorized}}}\nparameters:\n  a: {{bounds: [0, 1]}}\nquantities: {{y: y}}\n"
            "analysis: {type: montecarlo, samples: 2000}\nexecution: {scheduler: sync}\n")
    result = studyrun.run(write_study(study_dir, text), study_dir / "out", report=False)
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(study_dir / "out" / "runs.sqlite")) as db:
        sizes = [size for (size,) in db.execute("SELECT size FROM batches ORDER BY seq")]
    assert sum(sizes) == 2000 and batches[0] <= len(sizes) <= batches[1], sizes
    fixed = studyrun.run(write_study(study_dir, text.replace("{scheduler: sync}",
                                                             "{scheduler: sync, batch_size: 250}"),
                                     "fixed.yaml"), study_dir / "fixed", report=False)
    assert fixed.results == result.results


FLAKY = """
name: flaky
model: {type: python, function: "linear:flaky"}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
analysis: {type: sweep, levels: 11}
execution: {on_failure: ON_FAILURE}
"""


def test_failed_runs_are_recorded_and_the_study_goes_on(study_dir):
    result = studyrun.run(write_study(study_dir, FLAKY.replace("ON_FAILURE", "continue")),
                          study_dir / "out", report=False)
    frame = result.runs
    a, b = frame["a"].to_numpy(), frame["b"].to_numpy()
    expected_failed = (a > 0.8) | (b > 0.9)
    assert (frame["run.status"].eq("failed").to_numpy() == expected_failed).all()
    errors = frame.loc[frame["run.status"] == "failed", "run.error"]
    assert errors.str.contains("ValueError: a is too large").any()
    assert errors.str.contains("is nan").any()
    values = result.results["value"]["values"]
    assert [v is None for v in values] == expected_failed.tolist()
    assert result.analysis["runs"]["failed"] == int(expected_failed.sum())


@pytest.mark.slow
def test_abort_stops_cleanly_with_the_failed_run(study_dir):
    path = write_study(study_dir, FLAKY.replace("ON_FAILURE", "abort"))
    done = run_cli("run", "--no-report", path, "--out", study_dir / "out", "--quiet")
    assert done.returncode == 1
    assert "failed" in done.stderr and "on_failure: continue" in done.stderr
    assert "Traceback" not in done.stderr


def test_second_process_on_the_same_folder_gets_a_clear_error(study_dir):
    from studyrun.core.errors import StoreError
    from studyrun.store.run_store import RunStore

    path = write_study(study_dir, LINEAR_MC.replace("20000", "10"))
    with RunStore.open(study_dir / "out" / "runs.sqlite"):
        with pytest.raises(StoreError, match="another studyrun"):
            studyrun.run(path, study_dir / "out", report=False)


@pytest.mark.slow
def test_analysis_json_has_the_contracted_keys(study_dir):
    result = studyrun.run(write_study(study_dir, LINEAR_MC.replace("20000", "64")), study_dir / "out", report=False)
    data = json.loads((study_dir / "out" / "analysis.json").read_text())
    assert data["study"] == "linear-mc" and data["analysis"] == "montecarlo"
    assert set(data["results"]["y"]) >= {"mean", "std", "min", "max", "percentiles"}
    assert set(data["results"]["y"]["percentiles"]) == {"5", "50", "95"}
    provenance = data["provenance"]
    assert set(provenance) >= {"studyrun", "python", "packages", "study_sha256", "git", "seed",
                               "started", "finished"}
    assert provenance["seed"] == 42 and len(provenance["study_sha256"]) == 64
    # the versions as importlib.metadata reads them, every installed package of the list
    assert provenance["packages"] == {name: metadata.version(name) for name in PACKAGES}
    assert result.analysis["results"] == data["results"]


@pytest.mark.slow
def test_report_rebuilds_from_the_results_folder(study_dir):
    studyrun.run(write_study(study_dir, LINEAR_MC.replace("20000", "64")), study_dir / "out")
    report = study_dir / "out" / "report.md"
    report.unlink()
    done = run_cli("report", study_dir / "out")
    assert done.returncode == 0, done.stderr
    assert "Monte Carlo" in report.read_text()


@pytest.mark.slow
def test_no_report_draws_none_removes_an_earlier_one_and_report_draws_it_later(study_dir):
    path = write_study(study_dir, LINEAR_MC.replace("20000", "64"))
    out = study_dir / "out"
    studyrun.run(path, out)
    figures = sorted(p.name for p in (out / "figures").iterdir())
    done = run_cli("run", path, "--out", out, "--quiet", "--no-report")
    assert done.returncode == 0, done.stderr
    assert {"report.md", "report.html", "figures"}.isdisjoint(p.name for p in out.iterdir())
    assert json.loads((out / "analysis.json").read_text())["runs"]["reused"] == 64
    done = run_cli("report", out)
    assert done.returncode == 0, done.stderr
    assert "Monte Carlo" in (out / "report.md").read_text() and (out / "report.html").is_file()
    assert sorted(p.name for p in (out / "figures").iterdir()) == figures


@pytest.mark.slow
def test_plan_shows_runs_and_writes_a_csv(study_dir):
    path = write_study(study_dir, LINEAR_MC.replace("20000", "64"))
    done = run_cli("plan", path, "--csv", study_dir / "design.csv")
    assert done.returncode == 0, done.stderr
    assert "runs: 64" in done.stdout
    lines = (study_dir / "design.csv").read_text().splitlines()
    assert lines[0] == "run.index,run.id,a,b" and len(lines) == 65
    assert not (study_dir / "results").exists()


@pytest.mark.slow
def test_open_results_reads_a_folder_back(study_dir):
    studyrun.run(write_study(study_dir, LINEAR_MC.replace("20000", "64")), study_dir / "out", report=False)
    results = studyrun.open_results(study_dir / "out")
    assert results.analysis["runs"]["planned"] == 64 and len(results.runs) == 64
    assert isinstance(studyrun.load(study_dir / "study.yaml").seed, int)


@pytest.mark.slow
def test_quantities_reduce_series(study_dir):
    (study_dir / "decay.py").write_text(
        "import numpy as np\nT = np.linspace(0, 10, 101)\n"
        "def decay(k):\n    y = 100 * np.exp(-k * T)\n    return {'time': T, 'y': y}\n")
    text = """
    name: reductions
    model: {type: python, function: "decay:decay"}
    parameters: {k: {bounds: [0.5, 0.5]}}
    quantities:
      final: final(y)
      first: initial(y)
      peak: max(y)
      low: min(y, 0, 5)
      average: mean(y)
      area: integral(y)
      window: integral(y, 2, 4)
      at3: at(y, 3.05)
      ratio: max(y) / final(y)
    analysis: {type: sweep, cases: [{k: 0.5}]}
    """
    result = studyrun.run(write_study(study_dir, text.replace("bounds: [0.5, 0.5]", "bounds: [0.4, 0.6]")),
                          study_dir / "out", report=False)
    r = {name: v["values"][0] for name, v in result.results.items()}
    assert r["final"] == pytest.approx(100 * math.exp(-5))
    assert r["first"] == pytest.approx(100) and r["peak"] == pytest.approx(100)
    assert r["low"] == pytest.approx(100 * math.exp(-2.5))
    assert r["area"] == pytest.approx(200 * (1 - math.exp(-5)), rel=1e-3)
    assert r["window"] == pytest.approx(200 * (math.exp(-1) - math.exp(-2)), rel=1e-3)
    assert r["at3"] == pytest.approx(100 * math.exp(-1.525), rel=1e-3)
    assert r["ratio"] == pytest.approx(math.exp(5))
    # the time average over [0, 10], by the trapezoid rule on the 101 output times
    t = np.linspace(0, 10, 101)
    assert r["average"] == pytest.approx(np.trapezoid(100 * np.exp(-0.5 * t), t) / 10, rel=1e-12)
    assert r["average"] == pytest.approx(20 * (1 - math.exp(-5)), rel=1e-3)


@pytest.mark.slow
def test_a_design_streamed_in_chunks_gives_the_same_analysis(study_dir, monkeypatch):
    import studyrun.commands.pipeline
    import studyrun.plan.runs

    text = LINEAR_MC.replace("20000", "5000").replace("sobol", "random")
    text = text.replace("c: 4", "c: {distribution: discrete, values: [0, 1, 2]}")  # ties in ranks
    path = write_study(study_dir, text)
    whole = studyrun.run(path, study_dir / "whole")
    monkeypatch.setattr(studyrun.commands.pipeline, "CHUNK_ROWS", 1024)
    monkeypatch.setattr(studyrun.plan.runs, "CHUNK_ROWS", 1024)
    chunked = studyrun.run(path, study_dir / "chunked")
    report = (study_dir / "chunked" / "report.md").read_text()
    assert "The figures show the first 1,024 runs of the design's 5,000" in report
    assert "The figures show" not in (study_dir / "whole" / "report.md").read_text()
    assert chunked.analysis["runs"] == whole.analysis["runs"]
    for name, expected in whole.results.items():
        got = chunked.results[name]
        assert got["n"] == expected["n"] and got["min"] == expected["min"] and got["max"] == expected["max"]
        assert got["percentiles"] == expected["percentiles"]
        assert got["mean"] == pytest.approx(expected["mean"], rel=1e-12)
        assert got["std"] == pytest.approx(expected["std"], rel=1e-12)
        for p, rho in expected["correlations"].items():
            assert got["correlations"][p] == pytest.approx(rho, abs=1e-12)
    same = ["run.index", "run.id", "run.status", "a", "b", "c", "y", "a2"]
    assert chunked.runs[same].equals(whole.runs[same])  # runs.csv: from the store / from memory


def test_batches_shrink_towards_the_end_so_workers_finish_together():
    from studyrun.execution.execute import split_batches

    rows = np.arange(450)
    fixed = split_batches(rows, 25)
    assert [len(b) for b in fixed] == [25] * 18
    guided = split_batches(rows, 25, workers=2, smallest=3)
    assert np.array_equal(np.concatenate(guided), rows)  # every row once, in order
    sizes = [len(b) for b in guided]
    assert max(sizes) == 25 and sizes == sorted(sizes, reverse=True)
    # the last batches hold at most a quarter of what remains, down to `smallest`
    left = 450
    for size in sizes:
        assert size <= max(3, -(-left // 4))
        left -= size
    assert sizes[-2:] == [3, 3]


def test_rank_correlations_match_scipy_and_known_answers():
    from scipy.stats import spearmanr

    from studyrun.analyses.montecarlo.ranks import Ranks

    rng = np.random.default_rng(3)
    inputs = np.column_stack([rng.uniform(size=500), rng.integers(0, 4, 500), np.full(500, 2.0)])
    y = inputs[:, 0] ** 3  # monotone in the first input: rho exactly 1
    noisy = inputs[:, 0] + inputs[:, 1] + rng.normal(size=500)  # with ties in the second input
    ranks = Ranks(inputs)
    assert ranks.spearman(y)[0] == pytest.approx(1.0, abs=1e-15)
    assert ranks.spearman(y)[2] is None and ranks.spearman(np.ones(500)) == [None] * 3
    for j, rho in enumerate(ranks.spearman(noisy)[:2]):
        assert rho == pytest.approx(spearmanr(inputs[:, j], noisy).statistic, abs=1e-12)


@pytest.mark.slow
def test_the_runs_error_column_is_text_whether_or_not_a_run_failed(study_dir):
    flaky = LINEAR_MC.replace("linear:linear", "linear:flaky").replace(", vectorized: true", "")
    flaky = flaky.replace("  c: 4\n", "").replace("{y: y, a2: a_squared}", "{y: value}")
    flaky = flaky.replace("20000", "64") + "execution: {scheduler: sync, on_failure: continue}\n"
    failing = studyrun.run(write_study(study_dir, flaky), study_dir / "failing", report=False)
    clean = studyrun.run(write_study(study_dir, LINEAR_MC.replace("20000", "64")), study_dir / "clean", report=False)
    for result in (failing, clean, studyrun.open_results(study_dir / "clean")):
        runs = result.runs
        assert runs["run.error"].dtype == object and runs["run.worker"].dtype == object
        ok = runs["run.status"] == "ok"
        assert runs.loc[ok, "run.error"].isna().all()
        assert runs.loc[~ok, "run.error"].map(type).eq(str).all()
    assert clean.runs["run.error"].isna().all() and (~failing.runs["run.error"].isna()).sum() > 0


def test_warnings_about_the_numbers_are_at_the_top_of_analysis_json_and_printed_at_the_end(study_dir):
    """Runs dropped from twelve quantities: twelve warnings in analysis.json's top-level
    `warnings` (each kept in its results.<q>.warnings too), ten printed after the closing line
    of `studyrun run`, then how many more."""
    quantities = ", ".join(f"q{i:02d}: value * {i}" for i in range(12))
    text = (FLAKY.replace("ON_FAILURE", "continue")
            .replace("analysis: {type: sweep, levels: 11}",
                     f"quantities: {{{quantities}}}\nanalysis: {{type: montecarlo, samples: 40}}"))
    done = run_cli("run", "--no-report", write_study(study_dir, text), "--out", study_dir / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    data = json.loads((study_dir / "out" / "analysis.json").read_text())
    dropped = data["results"]["q00"]["dropped_runs"]
    assert dropped > 0
    said = (f"{dropped} runs failed or gave no finite value and were left out; the statistics "
            f"use the remaining {40 - dropped}")
    assert [w.split(": ", 1)[0] for w in data["warnings"]] == [f"q{i:02d}" for i in range(12)]
    assert all(said in w for w in data["warnings"])
    assert data["results"]["q03"]["warnings"] == [data["warnings"][3].split(": ", 1)[1]]
    printed = [line for line in done.stderr.splitlines() if line.startswith("studyrun: warning: ")]
    assert printed[:10] == [f"studyrun: warning: {w}" for w in data["warnings"][:10]]
    assert printed[10:] == [f"studyrun: warning: and 2 more (`warnings` in "
                            f"{study_dir / 'out' / 'analysis.json'})"]


def test_closing_warnings_are_one_line_each_and_cannot_drive_the_terminal(capsys):
    from studyrun.cli import show_warnings

    show_warnings(["y: a model said \x1b[2J\x1b]0;owned\x07 and\nmore"], "out/analysis.json")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err
    assert err.startswith("studyrun: warning: y: a model said \\x1b[2J")
