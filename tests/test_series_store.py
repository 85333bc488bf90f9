"""Series in the run store: compressed blocks read back bit for bit, batches bounded by the
bytes their model output takes, and series too large to read whole analysed a chunk at a time
with the results of reading them whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import write_study

from studyrun.core.batch import ModelOutput, SeriesGroup
from studyrun.store.series import BLOCK_BYTES, decode, encode, pack


def odd_values(rng) -> np.ndarray:
    """Every kind of float64: random bit patterns (NaNs with payloads among them), infinities,
    signed zeros, subnormals, the extremes."""
    values = rng.integers(-2**63, 2**63 - 1, size=(5, 1000), dtype=np.int64).view(np.float64)
    values[0, :8] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, -1.7976931348623157e308, 1.0]
    return values


def oscillations(runs: int, points: int, rng) -> np.ndarray:
    """Smooth series, as an ODE solver's: damped oscillations about an offset."""
    t = np.linspace(0, 100, points)
    damping, frequency, offset = rng.uniform(0.01, 0.1, runs), rng.uniform(0.5, 2, runs), rng.normal(size=runs)
    return offset[:, None] + np.exp(-damping[:, None] * t) * np.cos(frequency[:, None] * t)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def test_values_are_read_back_bit_for_bit():
    rng = np.random.default_rng(7)
    for values in (odd_values(rng), oscillations(3, 5000, rng), rng.normal(size=(4, 777)),
                   np.zeros((1, 1)), np.full((2, 3), np.nan), np.zeros((0, 5))):
        assert same_bits(decode(encode(values), *values.shape), values)


def test_smooth_series_take_under_5_bytes_a_value_and_noise_under_8():
    rng = np.random.default_rng(8)
    smooth, noise = oscillations(100, 10_000, rng), rng.normal(size=(100, 10_000))
    assert len(encode(smooth)) / smooth.size < 5.0
    assert len(encode(noise)) / noise.size < 7.5


def test_a_batch_is_stored_in_blocks_by_grid_and_read_back_exactly(tmp_path):
    """Runs on two grids, a failed run in neither, a group long enough for several blocks: each
    run reads back its own values and grid, bit for bit; a run made again reads its latest."""
    from test_store import batch, prepared

    rng = np.random.default_rng(9)
    points = 10_000
    long_group = 2 * BLOCK_BYTES // (8 * points) + 5  # three blocks
    n = long_group + 3
    t1, t2 = np.linspace(0, 1, points), np.linspace(0, 3, 4)
    y1, y2 = oscillations(long_group, points, rng), odd_values(rng)[:2, :4]
    out = ModelOutput(n, groups=[SeriesGroup(np.arange(long_group), t1, {"y": y1, "v": -y1}),
                                 SeriesGroup(np.array([n - 2, n - 1]), t2, {"y": y2, "v": y2})])
    ids = np.arange(100, 100 + n, dtype=np.int64)
    blocks = pack(out, ids, ["y"])
    assert len(blocks) == 4 and all(set(b.data) == {"y", "time"} for b in blocks)
    with prepared(tmp_path / "runs.sqlite") as store:
        store.write(batch(ids, series=blocks))
        stored = store.series_reader().read(ids[::-1])[::-1]
        for i in range(long_group):
            assert same_bits(stored[i]["y"], y1[i]) and same_bits(stored[i]["time"], t1)
            assert "v" not in stored[i]
        assert stored[long_group] is None  # in no group: it failed
        assert same_bits(stored[-1]["y"], y2[1]) and same_bits(stored[-1]["time"], t2)
        assert store.series_reader().grids(ids[-2:])[0].tolist() == t2.tolist()
        again = ModelOutput(1, series={"y": np.array([[5.0, 6.0]])}, time=np.array([0.0, 1.0]))
        store.write(batch(ids[:1], series=pack(again, ids[:1])))
        assert store.series_reader().read(ids[:2])[0]["y"].tolist() == [5.0, 6.0]
        assert same_bits(store.series_reader().read(ids[:2])[1]["y"], y1[1])


CURVE = '''
import numpy as np

def curve(a, b, c):
    """Fails where a > 1.95; its grid ends later as c grows, so the runs' grids differ."""
    if a > 1.95:
        raise ValueError("too steep")
    t = np.linspace(0, 2 + 0.5 * c, 40)
    return {"time": t, "y": a * t**2 + b * t + a * b * c, "z": np.sin(a * t) + c}
'''

CURVE_SOBOL = """
name: curve
seed: 5
model: {type: python, function: "curve:curve"}
parameters:
  a: {bounds: [1, 2]}
  b: {bounds: [0, 1]}
  c: {bounds: [0, 1]}
quantities:
  trajectory: series(y)
  z: final(z)
analysis: {type: sobol, samples: 64, outputs: [z, y]}
execution: {scheduler: sync, on_failure: continue}
"""


def assert_close(a, b, where=""):
    """The same results, numbers equal to 1e-9 relative (sums in another order)."""
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for key in a:
            assert_close(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), where
    else:
        assert a == b, where


@pytest.mark.slow
def test_series_analysed_a_chunk_at_a_time_give_the_results_of_reading_them_whole(tmp_path,
                                                                                  monkeypatch):
    """Time-resolved Sobol' indices with failed runs (dropped blocks) and grids that differ
    (runs interpolated, those too short named): read whole, then in chunks of 35 runs, then
    again from the chunked store, every run reused."""
    import studyrun.plan.runs as planned
    from studyrun.commands.pipeline import run_study

    (tmp_path / "curve.py").write_text(CURVE)
    path = write_study(tmp_path, CURVE_SOBOL)
    whole = run_study(path, tmp_path / "whole", fresh=True, quiet=True, report=False)["results"]
    assert whole["y"]["dropped_blocks"] > 0 and "stop before" in whole["y"]["warnings"][0]
    assert whole["trajectory"]["effective_N"] == whole["y"]["effective_N"]
    monkeypatch.setattr(planned, "SERIES_CHUNK_BYTES", 8 * 40 * 2 * 35)
    chunked = run_study(path, tmp_path / "chunked", fresh=True, quiet=True, report=False)
    assert_close(whole, chunked["results"])
    monkeypatch.undo()
    again = run_study(path, tmp_path / "chunked", quiet=True, report=False)
    assert again["runs"]["reused"] == 64 * 5 - chunked["runs"]["failed"]  # failed: run again
    assert json.dumps(again["results"]) == json.dumps(whole)


# --- batches bounded by bytes -------------------------------------------------------------------

def test_a_batch_holds_at_most_batch_bytes_of_model_output():
    from studyrun.execution.execute import BATCH_BYTES, MAX_BATCH, choose_batch_size

    assert choose_batch_size(1e-7, 10**7, 1) == MAX_BATCH  # cheap scalar runs: as before
    assert choose_batch_size(1e-7, 10**7, 1, output_bytes=80_000) == BATCH_BYTES // 80_000
    assert choose_batch_size(1e-7, 10**7, 1, output_bytes=10 * BATCH_BYTES) == 1


LONG = '''
import numpy as np

def long(a):
    """A 100,000-point series a run: 800 kB of output."""
    t = np.linspace(0, 1, 100_000)
    return {"time": t, "y": a[:, None] * t}
'''


@pytest.mark.slow
def test_runs_with_long_series_are_batched_by_their_bytes(tmp_path):
    from studyrun.commands.pipeline import run_study
    from studyrun.execution.execute import BATCH_BYTES

    (tmp_path / "long.py").write_text(LONG)
    path = write_study(tmp_path, """
        name: long
        model: {type: python, function: "long:long", vectorized: true}
        parameters:
          a: {distribution: uniform, low: 0, high: 1}
        quantities: {end: final(y)}
        analysis: {type: montecarlo, samples: 600}
        execution: {scheduler: sync}
        """)
    analysis = run_study(path, tmp_path / "out", fresh=True, quiet=True, report=False)
    assert analysis["runs"]["succeeded"] == 600
    assert 1 <= analysis["execution"]["batch_size"] <= BATCH_BYTES // 800_000


# --- which series are kept -----------------------------------------------------------------------

TWO_SERIES = '''
import numpy as np

def two(a):
    t = np.linspace(0, 1, 50)
    return {"time": t, "y": a[:, None] * t, "v": a[:, None] + 0 * t}
'''


@pytest.mark.slow
def test_the_store_keeps_the_series_asked_for_or_every_one_with_keep_series(tmp_path):
    from studyrun.commands.pipeline import run_study
    from studyrun.store.run_store import RunStore

    (tmp_path / "two.py").write_text(TWO_SERIES)
    text = """
        name: two
        model: {type: python, function: "two:two", vectorized: true}
        parameters:
          a: {distribution: uniform, low: 0, high: 1}
        quantities: {path: series(y), end: final(v)}
        analysis: {type: montecarlo, samples: 40}
        execution: {scheduler: sync%s}
        """
    for keep, outputs in (("", ["time", "y"]), (", keep: series", ["time", "v", "y"])):
        path = write_study(tmp_path, text % keep)
        out = tmp_path / f"out{len(outputs)}"
        run_study(path, out, fresh=True, quiet=True, report=False)
        with RunStore.open_readonly(out / "runs.sqlite") as store:
            stored = store.series_reader().read(store.recorded()[0])
        assert len(stored) == 40
        assert all(sorted(s) == outputs for s in stored)


def test_series_quantities_are_read_back_only_by_analyses_that_read_them():
    from studyrun.analyses.montecarlo import Montecarlo
    from studyrun.analyses.sobol import Sobol
    from studyrun.blocks.quantities import Quantities
    from studyrun.plan.runs import series_kept, series_wanted

    quantities = Quantities({"path": "series(y)", "end": "final(v)"})
    montecarlo = Montecarlo(type="montecarlo", samples=10)
    sobol = Sobol(type="sobol", samples=16, outputs=["v"])
    assert series_wanted(quantities, montecarlo, None) == {}  # kept in the store, not read
    assert series_kept(quantities, montecarlo, None) == ("y",)
    assert series_wanted(quantities, sobol, None) == {"path": "y", "v": "v"}
    assert series_kept(quantities, sobol, None) == ("v", "y")
