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
    import studyrun
    from conftest import write_study

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
        result = studyrun.run(path, tmp_path / function)
        runs = result.runs
        assert result.analysis["runs"]["failed"] == 0, runs.get("error")
        assert sorted(runs["value"]) == [158.0, 308.0]  # x * 50 * 3 + 2.0 * 4.0
