"""The python model: constants reach the function; per-run results gather into batch arrays."""

import numpy as np

from studyrun.models.base import RunContext
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
