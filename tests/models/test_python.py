"""The python model: constants reach the function; per-run results gather into batch arrays."""

import os
import sys
import time

import numpy as np
import pytest
from conftest import alive

from studyrun.core.batch import RunContext
from studyrun.models.python import Python


def evaluate(tmp_path, source: str, inputs: dict, **spec):
    (tmp_path / "m.py").write_text(source)
    model = Python(type="python", function="m:f", **spec)
    n = len(next(iter(inputs.values())))
    return model.build(tmp_path)(inputs, RunContext(run_ids=np.arange(n)))


def test_constants_are_passed_unless_a_parameter_sets_them(tmp_path):
    source = "def f(x, k=100.0):\n    return x * k\n"
    out = evaluate(tmp_path, source, {"x": np.array([1.0, 2.0])}, constants={"k": 2.0})
    assert out.scalars["value"].tolist() == [2.0, 4.0]
    out = evaluate(tmp_path, source, {"x": np.array([1.0]), "k": np.array([3.0])},
                   constants={"k": 2.0})
    assert out.scalars["value"].tolist() == [3.0]


def test_vectorized_model_gets_constants(tmp_path):
    tmp_path = tmp_path / "vectorized"
    tmp_path.mkdir()
    source = "def f(x, k=100.0):\n    return x * k\n"
    out = evaluate(tmp_path, source, {"x": np.array([1.0, 2.0])}, constants={"k": 2.0},
                   vectorized=True)
    assert out.scalars["value"].tolist() == [2.0, 4.0]


def test_numbers_dicts_and_failures_gather_per_run(tmp_path):
    source = ("def f(x):\n"
              "    if x == 2:\n        raise ValueError('two')\n"
              "    return {'a': x, 'b': 2 * x} if x > 2 else x\n")
    out = evaluate(tmp_path, source, {"x": np.array([1.0, 2.0, 3.0])})
    assert out.errors[0] is None and "two" in out.errors[1] and out.errors[2] is None
    assert out.scalars["value"][0] == 1.0 and np.isnan(out.scalars["value"][2])
    assert out.scalars["a"][2] == 3.0 and out.scalars["b"][2] == 6.0
    (tmp_path / "ints").mkdir()  # functions are cached per folder
    plain = evaluate(tmp_path / "ints", "def f(x):\n    return int(x)\n", {"x": np.array([1.0, 5.0])})
    assert plain.scalars["value"].dtype == float and plain.scalars["value"].tolist() == [1.0, 5.0]


def test_sys_exit_and_keyboard_interrupt_fail_only_their_run(tmp_path):
    """A model's sys.exit or KeyboardInterrupt is that run's failure, said plainly."""
    source = ("import sys\n"
              "def f(x):\n"
              "    if x == 1:\n        sys.exit(3)\n"
              "    if x == 2:\n        sys.exit()\n"
              "    if x == 3:\n        raise KeyboardInterrupt\n"
              "    return x\n")
    out = evaluate(tmp_path, source, {"x": np.array([0.0, 1.0, 2.0, 3.0, 4.0])})
    assert out.errors[0] is None and out.errors[4] is None
    assert out.errors[1] == "the model called sys.exit(3) (at m.py:4)"
    assert out.errors[2] == "the model called sys.exit() (at m.py:6)"
    assert out.errors[3] == "the model raised KeyboardInterrupt (at m.py:8)"
    assert out.scalars["value"][4] == 4.0


def test_a_vectorized_model_calling_sys_exit_fails_its_batch(tmp_path):
    source = "import sys\ndef f(x):\n    sys.exit('no')\n"
    out = evaluate(tmp_path, source, {"x": np.array([1.0, 2.0])}, vectorized=True)
    assert out.errors == ["the model called sys.exit('no') (at m.py:3)"] * 2


RAGGED = ("import numpy as np\n"
          "def f(x):\n"
          "    t = np.arange(0.0, x, 0.5)\n"
          "    return {'time': t, 'y': x - t, 'top': float(x)}\n")


def test_series_of_different_lengths_keep_their_own_grids(tmp_path):
    out = evaluate(tmp_path, RAGGED, {"x": np.array([2.0, 3.0, 2.0])})
    assert out.errors == [None, None, None] and out.scalars["top"].tolist() == [2.0, 3.0, 2.0]
    groups = {tuple(np.arange(3)[g.rows]): g for g in out.series_groups()}
    assert set(groups) == {(0, 2), (1,)}
    assert groups[(0, 2)].time.tolist() == [0, 0.5, 1, 1.5]
    assert groups[(1,)].series["y"].tolist() == [[3, 2.5, 2, 1.5, 1, 0.5]]


def test_quantities_of_ragged_runs_are_each_runs_own(tmp_path):
    from studyrun.blocks.quantities import Quantities

    inputs = {"x": np.array([2.0, 3.0, 5.0])}
    out = evaluate(tmp_path, RAGGED, inputs)
    values = Quantities({"end": "final(time)", "low": "final(y)", "area": "integral(y)"}
                        ).evaluate(out, inputs)
    assert out.errors == [None] * 3
    assert values["end"].tolist() == [1.5, 2.5, 4.5] and values["low"].tolist() == [0.5] * 3
    assert values["area"].tolist() == [np.trapezoid(x - np.arange(0, x, 0.5), np.arange(0, x, 0.5))
                                       for x in (2.0, 3.0, 5.0)]


def test_a_time_that_does_not_increase_fails_that_run_alone(tmp_path):
    source = ("def f(x):\n"
              "    return {'time': [0, 1, 1] if x > 1 else [0, 1, 2], 'y': [x, x, x]}\n")
    out = evaluate(tmp_path, source, {"x": np.array([1.0, 2.0])})
    assert out.errors[0] is None
    assert out.errors[1] == ("bad return value: 'time' must be a non-empty list of strictly "
                             "increasing numbers")


COUNTING = '''
import numpy as np

def f(x, nsamples, scale, count, ratio):
    kinds = [type(v).__name__ for v in (nsamples, scale, count, ratio)]
    assert kinds == ["int", "float", "int", "float"], kinds
    return x * len(range(nsamples)) * count + scale * ratio

def g(x, nsamples, scale, count, ratio):
    kinds = [np.asarray(v).dtype.kind for v in (nsamples, scale, count, ratio)]
    assert kinds == ["i", "f", "i", "f"], kinds
    return x * nsamples * count + scale * ratio
'''


def test_whole_number_constants_and_fixed_parameters_arrive_as_ints(tmp_path):
    """YAML's types are kept: `nsamples: 50` is an int, `scale: 2.0` a float (per run and vectorized)."""
    from conftest import write_study

    import studyrun

    (tmp_path / "counting.py").write_text(COUNTING)
    for function, vectorized in [("f", "false"), ("g", "true")]:
        path = write_study(tmp_path, f"""
            name: counting-{function}
            model: {{type: python, function: "counting:{function}", vectorized: {vectorized},
                     constants: {{nsamples: 50, scale: 2.0}}}}
            parameters:
              x: {{bounds: [1, 2]}}
              count: 3
              ratio: {{value: 4.0}}
            analysis: {{type: sweep, levels: {{x: [1, 2]}}}}
            execution: {{scheduler: sync}}
            """)
        result = studyrun.run(path, tmp_path / function, report=False)
        runs = result.runs
        assert result.analysis["runs"]["failed"] == 0, runs.get("error")
        assert sorted(runs["value"]) == [158.0, 308.0]  # x * 50 * 3 + 2.0 * 4.0


def test_a_new_code_digest_makes_a_prepared_evaluator_import_the_edited_module(tmp_path):
    (tmp_path / "edited.py").write_text("def f(x):\n    return 1.0\n")
    evaluator = Python(type="python", function="edited:f").build(tmp_path)
    assert evaluator.runs_user_code
    evaluator.prepare()
    (tmp_path / "edited.py").write_text("def f(x):\n    return 22.0\n")
    context = RunContext(run_ids=np.arange(1))
    assert evaluator({"x": np.zeros(1)}, context).scalars["value"][0] == 1.0  # imported once
    fresh = evaluator.with_code("another digest")
    assert fresh.code == "another digest" and evaluator.code != fresh.code
    assert fresh({"x": np.zeros(1)}, context).scalars["value"][0] == 22.0


def test_its_files_read_from_import_statements_are_those_an_import_finds(tmp_path):
    """static_dependencies (for `diff --rev`, which must not run a revision's code) reads the
    import statements: the module, a helper, a package's modules imported absolutely, relatively
    and inside a function, none of the environment's; and it runs nothing."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "m.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('ran').touch()\n"
        "import numpy as np\nimport helper\nfrom pkg import sub\n\n"
        "def f(x):\n    from pkg.late import g\n    return g(sub.h(helper.k(np.asarray(x))))\n")
    (tmp_path / "helper.py").write_text("def k(x):\n    return x\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub.py").write_text("from .deep import h\n")
    (tmp_path / "pkg" / "deep.py").write_text("def h(x):\n    return x\n")
    (tmp_path / "pkg" / "late.py").write_text("def g(x):\n    return x\n")
    model = Python(type="python", function="m:f")
    static = model.static_dependencies(tmp_path)
    assert sorted(static) == ["helper.py", "m.py", "pkg/__init__.py", "pkg/deep.py",
                              "pkg/late.py", "pkg/sub.py"]
    assert not (tmp_path / "ran").exists()
    imported = model.dependencies(tmp_path)  # imports m in a fresh interpreter
    assert (tmp_path / "ran").exists()
    assert set(imported) == set(static) - {"pkg/late.py"}  # imported only when f is called


def test_a_function_that_declares_rng_or_seed_gets_its_runs_own(tmp_path):
    """rng: each run's Generator, seed: each run's int; a list and an array when vectorized; the
    same for a run whatever batch it is in; a parameter of that name passed instead."""
    from studyrun.core.seeds import run_seed, run_seed_sequence

    source = ("import numpy as np\n"
              "def f(x, rng, *, seed):\n"
              "    if isinstance(rng, list):\n"
              "        return {'u': np.array([g.random() for g in rng]), 'seed': seed,\n"
              "                'int64': seed.dtype == np.int64}\n"
              "    return {'u': rng.random(), 'seed': seed, 'int64': isinstance(seed, int)}\n")
    (tmp_path / "m.py").write_text(source)
    ids = np.array([-5, 3, 2**62], dtype=np.int64)
    expected_u = [np.random.default_rng(run_seed_sequence(i)).random() for i in ids.tolist()]
    expected_seed = [run_seed(i) for i in ids.tolist()]
    for vectorized in (False, True):
        model = Python(type="python", function="m:f", vectorized=vectorized)
        assert model.uses_seed(tmp_path)
        evaluator = model.build(tmp_path)
        whole = evaluator({"x": np.zeros(3)}, RunContext(run_ids=ids))
        one = evaluator({"x": np.zeros(1)}, RunContext(run_ids=ids[2:]))
        assert whole.scalars["u"].tolist() == expected_u and one.scalars["u"][0] == expected_u[2]
        assert whole.scalars["seed"].tolist() == expected_seed and whole.scalars["int64"].all()
        given = evaluator({"x": np.zeros(3), "seed": np.array([4.0, 5.0, 6.0])},
                          RunContext(run_ids=ids))
        assert given.scalars["seed"].tolist() == [4.0, 5.0, 6.0]
    assert not Python(type="python", function="m:f", constants={"rng": 1, "seed": 2}).uses_seed(
        tmp_path)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "m.py").write_text("def f(x, **rest):\n    return x + len(rest)\n")
    plain = Python(type="python", function="m:f")
    assert not plain.uses_seed(tmp_path / "plain")  # **rest declares neither
    assert plain.build(tmp_path / "plain")({"x": np.zeros(1)}, RunContext(run_ids=ids[:1])) \
        .scalars["value"].tolist() == [0.0]


def test_what_the_interpreter_imports_at_start_up_is_not_the_models(tmp_path, monkeypatch):
    """A sitecustomize (Debian's python3 has one in /etc) is imported by every interpreter as it
    starts: it is no file the model's runs depend on, so editing it re-runs nothing."""
    from studyrun.models import imports
    from studyrun.models.imports import find_in_fresh_interpreter

    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "sitecustomize.py").write_text("X = 1\n")
    (tmp_path / "m.py").write_text("import helper\n\ndef f(x):\n    return helper.k(x)\n")
    (tmp_path / "helper.py").write_text("def k(x):\n    return x\n")
    monkeypatch.setenv("PYTHONPATH", str(custom))
    monkeypatch.setattr(imports.Zygote, "asked", 0)  # a fresh interpreter, not a zygote's child
    monkeypatch.setattr(imports.Zygote, "running", None)
    found = find_in_fresh_interpreter("m", [str(tmp_path), str(custom)], tmp_path)
    assert sorted(f.name for f in found) == ["helper.py", "m.py"]


def test_a_forked_interpreter_answers_as_a_fresh_one(tmp_path, monkeypatch):
    """From a process's second question on, a child of an interpreter that imported numpy
    answers: the same files, the same located error, an import that ends the interpreter said
    so; a study folder whose numpy.py would shadow the preloaded numpy is asked in a fresh
    interpreter, which finds that file."""
    import numpy  # noqa: F401 - the process has it, so the zygote preloads it

    from studyrun.core.errors import StudyError
    from studyrun.models import imports

    monkeypatch.setattr(imports.Zygote, "asked", 0)
    monkeypatch.setattr(imports.Zygote, "running", None)  # another test's stays to the end
    (tmp_path / "m.py").write_text("import numpy\nimport helper\nX = numpy.ones(1)\n")
    (tmp_path / "helper.py").write_text("import os\nK = os.environ.get('STUDYRUN_TEST_K')\n")
    (tmp_path / "broken.py").write_text("import no_such_module_anywhere\n")
    (tmp_path / "ends.py").write_text("import os\nos._exit(3)\n")
    paths = [str(tmp_path), *sys.path]
    first = imports.find_in_fresh_interpreter("m", paths, tmp_path)  # a fresh interpreter
    assert imports.Zygote.running is None
    again = imports.find_in_fresh_interpreter("m", paths, tmp_path)
    assert imports.Zygote.running is not None and "numpy" in imports.Zygote.running.preloaded
    assert [f.name for f in again] == [f.name for f in first] == ["helper.py", "m.py"]
    with pytest.raises(StudyError, match="cannot import 'broken' in a fresh interpreter to find "
                       "the files it imports: ModuleNotFoundError: No module named "
                       "'no_such_module_anywhere'"):
        imports.find_in_fresh_interpreter("broken", paths, tmp_path)
    with pytest.raises(StudyError, match="the import ended the interpreter"):
        imports.find_in_fresh_interpreter("ends", paths, tmp_path)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "numpy.py").write_text("ONES = 1\n")
    (shadow / "s.py").write_text("import numpy\n")
    found = imports.find_in_fresh_interpreter("s", [str(shadow), *sys.path], shadow)
    assert [f.name for f in found] == ["numpy.py", "s.py"]
    assert [f.name for f in imports.find_in_fresh_interpreter("m", paths, tmp_path)] == [
        "helper.py", "m.py"]  # the zygote still answers after all that
    zygote = imports.Zygote.running
    pid = os.fork()  # a process this one forks asks the same zygote, and leaves it running
    if pid == 0:
        try:
            found = imports.find_in_fresh_interpreter("m", paths, tmp_path)
            same = imports.Zygote.running is zygote and [f.name for f in found] == [
                "helper.py", "m.py"]
            zygote.close()  # as its exit handlers do
        except BaseException:
            same = False
        os._exit(0 if same else 1)
    assert os.waitpid(pid, 0)[1] == 0 and zygote.alive()


@pytest.mark.parametrize("zygote", [False, True], ids=["fresh", "zygote"])
def test_a_module_that_writes_over_the_answer_is_a_located_error(tmp_path, monkeypatch, zygote):
    """Hostile: a module whose import writes to every file it finds open (the answer's pipe or
    socket among them) gets a located error saying so, not a traceback, either way it is asked."""
    import numpy  # noqa: F401 - the zygote preloads it

    from studyrun.core.errors import StudyError
    from studyrun.models import imports

    monkeypatch.setattr(imports.Zygote, "asked", 1 if zygote else 0)
    monkeypatch.setattr(imports.Zygote, "running", None)
    (tmp_path / "scribble.py").write_text(
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'[1, 2\\n')\n"
        "    except OSError:\n        pass\n")
    with pytest.raises(StudyError, match="cannot import 'scribble' in a fresh interpreter to "
                       "find the files it imports: its import wrote over the interpreter's answer"):
        imports.find_in_fresh_interpreter("scribble", [str(tmp_path), *sys.path], tmp_path)
    assert (imports.Zygote.running is not None) == zygote


def test_each_argument_reaches_its_parameter_however_the_function_is_called(tmp_path):
    """A plain function whose first parameters are the inputs is called positionally, in its
    own order (not the study's); a wrapper, a keyword-only or positional-only parameter, a
    callable object: by keyword. The same values arrive either way."""
    source = ("import functools\n"
              "def f(b, a, k=1.0):\n    return {'a': a, 'b': b, 'k': k}\n"
              "def kwonly(b, *, a):\n    return {'a': a, 'b': b, 'k': 1.0}\n"
              "def posonly(b, /, a=0.0, **more):\n    return {'a': a, 'b': b, 'k': more['k']}\n"
              "@functools.wraps(f)\n"
              "def wrapped(*args, **kwargs):\n    return f(*args, **kwargs)\n"
              "class Callable:\n"
              "    def __call__(self, a, b, k):\n        return {'a': a, 'b': b, 'k': k}\n"
              "made = Callable()\n")
    inputs = {"a": np.array([1.0, 2.0]), "b": np.array([10.0, 20.0]), "k": np.array([5.0, 6.0])}
    for name in ["f", "kwonly", "wrapped", "made"]:
        folder = tmp_path / name  # functions are cached per folder
        folder.mkdir()
        (folder / "m.py").write_text(source)
        function_inputs = inputs if name != "kwonly" else {"a": inputs["a"], "b": inputs["b"]}
        out = Python(type="python", function=f"m:{name}").build(folder)(
            function_inputs, RunContext(run_ids=np.arange(2)))
        assert out.errors == [None, None], name
        assert out.scalars["a"].tolist() == [1.0, 2.0] and out.scalars["b"].tolist() == [10.0, 20.0]
        assert out.scalars["k"].tolist() == ([1.0, 1.0] if name == "kwonly" else [5.0, 6.0])
    folder = tmp_path / "posonly"
    folder.mkdir()
    (folder / "m.py").write_text(source)
    out = Python(type="python", function="m:posonly").build(folder)(
        inputs, RunContext(run_ids=np.arange(2)))  # b only by position: each run fails alike
    assert all("missing 1 required positional argument: 'b'" in e for e in out.errors)


def test_a_killed_owner_leaves_no_zygote_and_no_socket_folder(tmp_path):
    """The zygote ends when every process holding its stdin has, the one that started it
    killed (SIGKILL) too, and removes its private socket folder as it goes."""
    import signal
    import subprocess

    owner = subprocess.Popen([sys.executable, "-c", (
        "import numpy, sys, time\n"
        "from studyrun.models.imports import Zygote\n"
        "z = Zygote.start()\n"
        "print(z.process.pid, z.folder, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    pid, folder = owner.stdout.readline().split()
    assert os.path.isdir(folder)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (os.path.exists(folder) or alive(int(pid))):
        time.sleep(0.05)
    assert not os.path.exists(folder) and not alive(int(pid))
