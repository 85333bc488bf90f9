"""Every class of bad input ends in FILE:LINE:COL: path: message, exit status 2, no traceback."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli, write_study

GOOD = """
name: good
model: {type: python, function: "linear:linear", vectorized: true}
parameters:
  a: {distribution: uniform, low: 0, high: 1}
  b: {distribution: normal, mean: 0, std: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: 100}
"""

CASES = {
    "yaml_syntax": ("name: x\nmodel: {type: python\n", r":\d+:\d+: .*"),
    "unknown_key": (GOOD.replace("samples: 100", "smaples: 100"), r":7:\d+: analysis.smaples: .*did you mean 'samples'"),
    "wrong_type": (GOOD.replace("samples: 100", "samples: many"), r":7:\d+: analysis.samples: "),
    "negative_std": (GOOD.replace("std: 1", "std: -1"), r":5:\d+: parameters.b.std: "),
    "reversed_bounds": (GOOD.replace("{distribution: uniform, low: 0, high: 1}", "{bounds: [2, 1]}"),
                        r":4:\d+: parameters.a.bounds: "),
    "zero_samples": (GOOD.replace("samples: 100", "samples: 0"), r":7:\d+: analysis.samples: "),
    "unknown_distribution": (GOOD.replace("distribution: uniform", "distribution: unifrom"),
                             r":4:\d+: parameters.a.*did you mean 'uniform'"),
    "unknown_analysis": (GOOD.replace("type: montecarlo", "type: montecarl"),
                         r":7:\d+: analysis.*did you mean 'montecarlo'"),
    "unimportable_model": (GOOD.replace("linear:linear", "nosuchmodule:f"), r":2:\d+: model.function: cannot import"),
    "unknown_quantity_function": (GOOD.replace("{y: y}", "{y: maxx(y)}"), r":6:\d+: quantities.y: .*did you mean 'max'"),
    "empty_file": ("", r":.*empty"),
    "missing_model_file": (GOOD.replace('{type: python, function: "linear:linear", vectorized: true}',
                                        "{file: models/nothere.yaml}"), r":2:\d+: model.file: "),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_reported_with_its_line(study_dir, case):
    text, pattern = CASES[case]
    path = write_study(study_dir, text)
    done = run_cli("validate", path, cwd=study_dir)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(re.escape(str(path)) + pattern, done.stderr), done.stderr


def test_binary_garbage_is_reported(study_dir):
    path = study_dir / "garbage.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{path}:")


def test_all_errors_of_a_file_at_once(study_dir):
    text = GOOD.replace("std: 1", "std: -1").replace("samples: 100", "smaples: 100")
    done = run_cli("validate", write_study(study_dir, text))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and ":5:" in lines[0] and ":7:" in lines[1]


def test_errors_point_into_a_shared_model_file(study_dir):
    (study_dir / "models").mkdir()
    (study_dir / "models" / "m.yaml").write_text("type: python\nfunction: linear:linear\nvectorised: true\n")
    text = GOOD.replace('{type: python, function: "linear:linear", vectorized: true}', "{file: models/m.yaml}")
    done = run_cli("validate", write_study(study_dir, text))
    assert done.returncode == 2
    assert re.search(r"models/m\.yaml:3:1: model\.vectorised: .*did you mean 'vectorized'", done.stderr), done.stderr


def test_valid_study_validates(study_dir):
    done = run_cli("validate", write_study(study_dir, GOOD))
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout


def test_debug_shows_the_traceback(study_dir):
    done = run_cli("--debug", "validate", write_study(study_dir, GOOD.replace("std: 1", "std: -1")))
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_a_grid_too_large_to_plan_is_reported(study_dir):
    text = GOOD.replace("{type: montecarlo, samples: 100}", "{type: sweep, levels: 600000000}")
    done = run_cli("validate", write_study(study_dir, text))
    assert done.returncode == 2 and "analysis.levels: the design has 3.6e+17 runs" in done.stderr


def test_a_cluster_value_cannot_add_lines_to_the_job_script(study_dir):
    text = GOOD + 'execution: {scheduler: {cluster: slurm, cores: 2, memory: 4GB, queue: "q\\nrm -rf /"}}\n'
    done = run_cli("validate", write_study(study_dir, text))
    assert done.returncode == 2 and "execution.scheduler.queue: must be a single line" in done.stderr
