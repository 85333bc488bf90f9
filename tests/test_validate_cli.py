"""Every class of bad input ends in FILE:LINE:COL: path: message, exit status 2, no traceback."""

from __future__ import annotations

import re

import pytest
from conftest import run_cli, write_study

pytestmark = pytest.mark.slow  # the studyrun CLI in subprocesses

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
    "unknown_key": (GOOD.replace("samples: 100", "smaples: 100"),
                    r":7:\d+: analysis.smaples: .*did you mean 'samples'"),
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
    "unknown_quantity_function": (GOOD.replace("{y: y}", "{y: maxx(y)}"),
                                  r":6:\d+: quantities.y: .*did you mean 'max'"),
    "constant_quantity_name": (GOOD.replace("{y: y}", "{None: y}"),
                               r":6:\d+: quantities.None: 'None' cannot name a quantity: use "
                               r"letters, digits and _ \(not True, False, None\)"),
    "quantity_syntax_said_once": (GOOD.replace("{y: y}", "{y: 'y +* 2'}"),
                                  r":6:\d+: quantities.y: invalid syntax in 'y \+\* 2'\n"),
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


def test_a_mistake_in_one_section_hides_none_in_another(study_dir):
    """A misspelt distribution does not stop the checks across sections: the function that is
    not there and the quantity's unknown name are reported with it, each at its line."""
    text = (GOOD.replace("distribution: uniform", "distribution: unifrom")
            .replace("linear:linear", "linear:nosuch").replace("{y: y}", "{y: maxx(y)}"))
    assert_validate_says(study_dir, text, [
        r":2:\d+: model.function: cannot import 'linear:nosuch'",
        r":4:\d+: parameters.a: .*did you mean 'uniform'",
        r":6:\d+: quantities.y: .*did you mean 'max'"])


def assert_validate_says(study_dir, text: str, patterns: list[str]) -> None:
    """`studyrun validate` of the study: exit 2, no traceback, one line per pattern, in order."""
    done = run_cli("validate", write_study(study_dir, text))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(patterns), done.stderr
    for line, pattern in zip(lines, patterns):
        assert re.search(pattern, line), lines


def test_names_are_checked_against_the_model_beside_a_broken_parameter(study_dir):
    """Equations know their outputs: an unknown output and an input the model lacks are found
    beside a misspelt distribution and a bad analysis key; nothing is said of the broken
    parameter's name where a quantity uses it."""
    text = """
    name: ode
    model:
      type: ode
      time: {start: 0, stop: 4, step: 0.5}
      states: {x: 1}
      rates: {x: -k * x}
      constants: {k: 0.5}
    parameters:
      k: {distribution: lognromal, mu: 0, sigma: 1}
      kk: 2
    quantities: {end: final(xx), twice: 2 * k}
    analysis: {type: montecarlo, samples: -5}
    """
    assert_validate_says(study_dir, text, [
        r":9:\d+: parameters.k: .*did you mean 'lognormal'",
        r":10:\d+: parameters.kk: the model has no input 'kk'",
        r":11:\d+: quantities.end: unknown name 'xx'",
        r":12:\d+: analysis.samples: "])


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


@pytest.mark.parametrize("analysis, key, runs", [
    ("{type: montecarlo, samples: 1000000000000}", "samples", "1,000,000,000,000"),
    ("{type: sobol, samples: 67108864}", "samples", "268,435,456"),
    ("{type: morris, trajectories: 50000000}", "trajectories", "150,000,000"),
    ("{type: doe, design: full, levels: 20000}", "levels", "400,000,000"),
    ("{type: delta, samples: 200000000}", "samples", "200,000,000"),
])
def test_a_design_beyond_the_run_limit_is_located_before_anything_is_allocated(study_dir, analysis,
                                                                               key, runs):
    """`samples: 1000000000000` validated, then ran until killed (plan tried to allocate 7 TiB)."""
    path = write_study(study_dir, GOOD.replace("{type: montecarlo, samples: 100}", analysis))
    for command in ("validate", "plan"):
        done = run_cli(command, path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert re.search(rf"{re.escape(str(path))}:7:\d+: analysis.{key}: the design has {runs} "
                         r"runs, more than 100,000,000, the most a study may have \(its run store "
                         r"and runs.csv would pass 10 GB each\)", done.stderr), done.stderr


@pytest.mark.parametrize("address, message", [
    ("tcp://[::1", "expected local, threads, sync or a scheduler address"),
    ("inproc://x", "is an in-process address"),
    ("http://127.0.0.1:8786", "unknown protocol 'http://'"),
    ("tcp://127.0.0.1:70000", "port 70000 is out of range"),
])
def test_a_malformed_scheduler_address_is_located(study_dir, address, message):
    path = write_study(study_dir, GOOD + f"execution: {{scheduler: '{address}'}}\n")
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"{re.escape(str(path))}:8:\d+: execution.scheduler: .*{re.escape(message)}",
                     done.stderr), done.stderr
    done = run_cli("run", "--no-report", write_study(study_dir, GOOD), "--scheduler", address, "--out",
                   study_dir / "out", cwd=study_dir)
    assert done.returncode == 2 and done.stderr.startswith("--scheduler: "), done.stderr


@pytest.fixture
def garbage_server():
    """A real TCP server on 127.0.0.1 that answers every connection with bytes no Dask scheduler
    sends (read as a frame length, they once made Dask try to allocate 3 EiB)."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    listener.close()


def test_a_server_that_is_not_a_dask_scheduler_is_one_line_at_start(study_dir, garbage_server):
    """With batch_size auto a study this small runs in the pilot and used to pass without ever
    connecting; the address is checked at start instead."""
    path = write_study(study_dir, GOOD.replace("samples: 100", "samples: 4"))
    done = run_cli("run", "--no-report", path, "--scheduler", garbage_server, "--out", study_dir / "out",
                   cwd=study_dir)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"studyrun: the server at {garbage_server} is not a Dask scheduler (it "
                           "did not greet as one within 5 s); check the host and port of `dask "
                           "scheduler`\n")


def test_a_scheduler_that_is_not_there_is_one_line_at_start(study_dir):
    from conftest import free_port

    address = f"tcp://127.0.0.1:{free_port()}"
    path = write_study(study_dir, GOOD.replace("samples: 100", "samples: 4")
                       + f"execution: {{scheduler: '{address}'}}\n")
    done = run_cli("run", "--no-report", path, "--out", study_dir / "out", cwd=study_dir)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"studyrun: cannot reach the Dask scheduler at {address}: ")
    assert len(done.stderr.splitlines()) == 1


def test_an_iterative_analysis_beyond_the_run_limit_is_located(study_dir):
    text = GOOD.replace("{type: montecarlo, samples: 100}",
                        "{type: optimize, minimize: y, multistart: 1000000000000}")
    path = write_study(study_dir, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"{re.escape(str(path))}:7:\d+: analysis.multistart: the design asks for at "
                     r"least 1,000,000,000,001 runs, more than 100,000,000", done.stderr), done.stderr


def test_a_growing_design_whose_cap_passes_the_run_limit_is_located(study_dir):
    text = GOOD.replace("{type: montecarlo, samples: 100}",
                        "{type: montecarlo, samples: {start: 100, until: {ci: 0.1}, "
                        "max: 200000000}}")
    path = write_study(study_dir, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"{re.escape(str(path))}:7:\d+: analysis.samples.max: the design may grow "
                     r"to 200,000,000 runs, more than 100,000,000", done.stderr), done.stderr


@pytest.mark.parametrize("analysis", ["sobol, samples: 64", "morris", "dgsm", "fast"])
def test_parameters_that_all_have_mistakes_are_not_called_fixed(study_dir, analysis):
    """Every parameter of a sensitivity analysis has a mistake: each is reported at its line, and
    nothing says that every parameter is fixed (they are not: they are broken)."""
    text = f"""
    name: broken
    model: {{type: python, function: "linear:linear"}}
    parameters:
      a: {{distribution: unifrom, low: 0, high: 1}}
      b: {{bounds: [1, 0]}}
    quantities: {{y: y}}
    analysis: {{type: {analysis}}}
    """
    assert_validate_says(study_dir, text, [r":4:\d+: parameters.a: ", r":5:\d+: parameters.b"])


@pytest.mark.parametrize("analysis", ["sobol", "morris", "fast", "rbd_fast", "delta", "pawn",
                                      "dgsm", "shapley"])
def test_a_study_whose_parameters_are_all_fixed_says_so_once(study_dir, analysis):
    """The study's own check says that no parameter is varied; the analysis does not say it again."""
    text = f"""
    name: fixed
    model: {{type: python, function: "linear:linear"}}
    parameters: {{a: 1, b: 2}}
    quantities: {{y: y}}
    analysis: {{type: {analysis}}}
    """
    assert_validate_says(study_dir, text, [r":3:\d+: parameters: no parameter is varied"])
