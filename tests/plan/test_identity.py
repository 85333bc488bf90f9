"""Run identity: the same run in the same context has the same 64-bit id, in any batch, slice or
session; any other value or context gives another id. A change of these ids makes every stored
run unreusable, so a few are pinned below."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest
from conftest import stored_runs, write_study

from studyrun.core.design import Design
from studyrun.plan import make_plan, plan_slices
from studyrun.plan.identity import Occurrences, canonical_bits, context_bytes, hash_rows, mix

MASK = 2**64 - 1


def reference_mix(h: int) -> int:
    """splitmix64's finaliser on Python integers, as published (Steele, Lea and Flood 2014)."""
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK
    return h ^ (h >> 31)


def reference_id(row: list[float], context: bytes) -> int:
    """A row's id (its first occurrence) computed one value at a time, without numpy."""
    h = int.from_bytes(hashlib.sha256(context).digest()[:8], "little")
    for value in row:
        value = 0.0 if value == 0.0 else float("nan") if value != value else value
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
        h = reference_mix((h + 0x9E3779B97F4A7C15 + bits) & MASK)
    return h - 2**64 if h >= 2**63 else h


def test_pinned_ids_do_not_change():
    """Changing these values makes every run of every existing store unreusable: bump the store
    format (and say so) if that is meant."""
    matrix = np.array([[0.0, 1.0], [0.5, -2.25], [0.0, 1.0], [1e300, -0.0]])
    assert hash_rows(matrix, b"golden").tolist() == [
        3400788008543578893, -8436097467047406878, -3262755567291839908, 6685000758788249384]
    # given runs' content hashed as columns after the design's: the same as one matrix
    assert hash_rows(matrix[:, :1], b"golden", more=matrix[:, 1]).tolist() == hash_rows(
        matrix, b"golden").tolist()
    assert mix(np.array([0, 1, MASK], dtype=np.uint64)).tolist() == [
        0, 6238072747940578789, 13029008266876403067]
    assert context_bytes({"b": 1, "a": [1.5, "x"]}) == b'{"a": [1.5, "x"], "b": 1}'
    plan = make_plan(Design(["a", "b"], matrix.copy()), {"c": 3.0},
                     {"model": {"type": "python"}, "code": "0123"})
    assert plan.run_ids.tolist() == [
        204378216001792552, 973772263564311687, 4986504727590685920, 2252055405417818411]


def test_mix_is_splitmix64s_finaliser():
    values = np.random.default_rng(0).integers(0, MASK, 200, dtype=np.uint64, endpoint=True)
    assert mix(values).tolist() == [reference_mix(v) for v in values.tolist()]


def test_ids_are_the_rows_hashed_value_by_value():
    rng = np.random.default_rng(1)
    matrix = np.r_[rng.normal(size=(50, 3)) * 10.0 ** rng.integers(-300, 300, (50, 3)),
                   [[np.inf, -np.inf, 5e-324]]]
    ids = hash_rows(matrix, b"context")
    assert ids.dtype == np.int64 and ids.shape == (51,)
    assert ids.tolist() == [reference_id(row, b"context") for row in matrix.tolist()]


def test_the_same_rows_and_context_give_the_same_ids():
    matrix = np.random.default_rng(2).random((100, 4))
    first = hash_rows(matrix, b"ctx")
    assert (hash_rows(matrix.copy(), b"ctx") == first).all()
    assert (hash_rows(np.asfortranarray(matrix), b"ctx") == first).all()  # layout is no value
    assert (hash_rows(matrix[::-1], b"ctx") == first[::-1]).all()  # nor is the row order
    assert (hash_rows(matrix[37:38], b"ctx") == first[37:38]).all()  # nor the other rows
    assert len(np.unique(first)) == 100


def test_any_other_value_or_context_gives_another_id():
    matrix = np.random.default_rng(3).random((6, 3))
    ids = hash_rows(matrix, b"ctx")
    for i in range(6):
        for j in range(3):
            for changed in (np.nextafter(matrix[i, j], 2.0), -matrix[i, j], 0.0, np.nan):
                other = matrix.copy()
                other[i, j] = changed
                new = hash_rows(other, b"ctx")
                assert new[i] != ids[i]
                assert (np.delete(new, i) == np.delete(ids, i)).all()
    assert hash_rows(matrix[:, ::-1], b"ctx")[0] != ids[0]  # the order of the values counts
    assert hash_rows(matrix[:, :2], b"ctx")[0] != ids[0]  # and their number
    assert not np.isin(hash_rows(matrix, b"ctx "), ids).any()
    assert not np.isin(hash_rows(matrix, b""), ids).any()


def test_the_context_is_canonical_json():
    assert context_bytes({"b": {"y": 1, "x": 2}, "a": 1}) == context_bytes({"a": 1, "b": {"x": 2, "y": 1}})
    assert context_bytes({"a": 1}) != context_bytes({"a": 1.5})
    assert context_bytes({"path": __import__("pathlib").Path("/x")}) == b'{"path": "/x"}'
    design = Design(["a"], np.array([[0.25]]))
    base = make_plan(design, {"f": 1.0}, {"code": "x"}).run_ids
    for fixed, context in [({"f": 2.0}, {"code": "x"}), ({}, {"code": "x"}),
                           ({"f": 1.0}, {"code": "y"}), ({"f": 1.0}, {"code": "x", "more": 0})]:
        assert make_plan(Design(["a"], np.array([[0.25]])), fixed, context).run_ids != base
    assert make_plan(Design(["b"], np.array([[0.25]])), {"f": 1.0}, {"code": "x"}).run_ids != base


def test_minus_zero_is_zero_and_every_nan_is_alike():
    nans = [struct.unpack("<d", struct.pack("<Q", bits))[0]
            for bits in (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
                         0x7FFFFFFFFFFFFFFF)]
    assert all(v != v for v in nans)
    matrix = np.array([[0.0, nans[0]], [-0.0, nans[1]], [0.0, nans[2]], [-0.0, nans[3]]])
    bits = canonical_bits(matrix)
    assert bits.dtype == np.uint64 and (bits == bits[0]).all()
    assert np.signbit(matrix[1, 0])  # the caller's matrix is left as it was
    single = [hash_rows(matrix[i:i + 1], b"ctx")[0] for i in range(4)]
    assert len(set(single)) == 1
    assert single[0] == hash_rows(np.array([[0.0, np.nan]]), b"ctx")[0]


def test_replicated_rows_get_distinct_ids_by_their_occurrence():
    x, y, z = [0.5, 0.5], [0.25, 1.0], [1.0, 0.0]
    alone = hash_rows(np.array([x, x, x]), b"ctx")
    assert len(set(alone.tolist())) == 3
    assert alone[0] == hash_rows(np.array([x]), b"ctx")[0]  # the first is the row's own id
    mixed = hash_rows(np.array([y, x, z, x, y, x]), b"ctx")
    assert mixed[[1, 3, 5]].tolist() == alone.tolist()  # the k-th x whatever else is there
    assert mixed[0] == hash_rows(np.array([y]), b"ctx")[0] and mixed[5] != mixed[0]
    assert hash_rows(np.array([z, x, x]), b"ctx")[2] == alone[1]
    assert hash_rows(np.array([x, x, x]), b"other").tolist() != alone.tolist()


def test_a_replicated_design_has_no_two_runs_alike():
    levels = np.array(np.meshgrid([0.0, 0.5, 1.0], [-1.0, 1.0], [2.0, 3.0, 4.0])).reshape(3, -1).T
    design = np.tile(levels, (40, 1))  # every point forty times
    np.random.default_rng(4).shuffle(design)
    ids = hash_rows(design, b"ctx")
    assert len(np.unique(ids)) == len(design)
    point = (design == levels[7]).all(axis=1)
    assert (hash_rows(design[point], b"ctx") == ids[point]).all()



def test_repeats_are_numbered_across_slices_planned_with_the_same_occurrences():
    rng = np.random.default_rng(6)
    design = rng.integers(0, 3, (500, 2)).astype(float)  # nine points, each about 55 times
    whole = hash_rows(design, b"ctx")
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 500), rng.integers(1, 8), replace=False))
        earlier = Occurrences()
        sliced = np.concatenate([hash_rows(part, b"ctx", earlier)
                                 for part in np.split(design, cuts)])
        assert sliced.tolist() == whole.tolist()
    assert len(np.unique(whole)) == 500


def test_a_later_slice_repeating_rows_of_distinct_earlier_slices_numbers_them_after_those():
    """Slices of distinct rows are counted by their keys alone, until a row comes again."""
    rng = np.random.default_rng(8)
    distinct = rng.random((300, 2))
    design = np.concatenate([distinct[:100], distinct[100:], distinct[[5, 150, 5]]])
    whole = hash_rows(design, b"ctx")
    earlier = Occurrences()
    sliced = np.concatenate([hash_rows(part, b"ctx", earlier)
                             for part in np.split(design, [100, 300, 301])])
    assert sliced.tolist() == whole.tolist()
    assert len(np.unique(whole)) == len(design)
    assert earlier.counts is not None and earlier.counts.max() == 3


def test_without_occurrences_each_call_numbers_its_own_repeats():
    """An iterative analysis asks point by point: a point asked again later is the same run."""
    x = np.array([[0.5, 0.5]])
    first = hash_rows(np.r_[x, x], b"ctx")
    assert hash_rows(np.r_[x, x], b"ctx").tolist() == first.tolist()
    earlier = Occurrences()
    hash_rows(np.r_[x, x], b"ctx", earlier)
    later = hash_rows(x, b"ctx", earlier)  # the third x of a design
    assert later[0] not in first and later[0] == hash_rows(np.r_[x, x, x], b"ctx")[2]

DESIGNED = """
    name: chunked
    seed: 11
    model: {type: python, function: "linear:linear"}
    parameters: PARAMETERS
    quantities: {y: y}
    analysis: {type: montecarlo, samples: 200, sampling: SAMPLING}
"""


def plans_whole_and_in_slices(folder, parameters: str, sampling: str = "random", rows: int = 64):
    """The ids of a study's design planned whole (as `studyrun plan` does) and slice by slice,
    its repeats counted across slices (as `studyrun run` does beyond CHUNK_ROWS runs)."""
    from studyrun.plan.study import identity_context
    from studyrun.study.loading import load_study

    study = write_study(folder, DESIGNED.replace("PARAMETERS", parameters)
                        .replace("SAMPLING", sampling))
    loaded = load_study(study)
    context, fixed, identity = loaded.context, loaded.context.fixed, identity_context(loaded)
    analysis, seed = loaded.study.analysis, loaded.study.seed
    whole = make_plan(analysis.design(context, np.random.SeedSequence(seed)), fixed, identity)
    slices = list(plan_slices(analysis.design_chunks(context, np.random.SeedSequence(seed), rows),
                              fixed, identity))
    assert len(slices) == -(-200 // rows)
    assert (np.vstack([s.design.matrix for s in slices]) == whole.design.matrix).all()
    return whole.run_ids, np.concatenate([s.run_ids for s in slices])


@pytest.mark.parametrize("sampling", ["random", "sobol"])
def test_ids_of_a_design_are_the_same_whole_or_slice_by_slice(study_dir, sampling):
    whole, sliced = plans_whole_and_in_slices(
        study_dir, "{a: {bounds: [0, 1]}, b: {distribution: normal, mean: 0, std: 1}}", sampling)
    assert whole.tolist() == sliced.tolist()
    assert len(np.unique(whole)) == 200


def test_ids_of_a_design_with_repeated_rows_are_the_same_whole_or_slice_by_slice(study_dir):
    whole, sliced = plans_whole_and_in_slices(
        study_dir, "{a: {distribution: discrete, values: [1, 2, 3]}, "
                   "b: {distribution: discrete, values: [0.5, 1.5]}}")
    assert len(np.unique(whole)) == 200
    assert len(np.unique(sliced)) == 200
    assert whole.tolist() == sliced.tolist()


def test_a_fresh_run_of_a_sliced_design_of_repeated_rows_runs_every_run(study_dir, monkeypatch):
    import studyrun
    from studyrun.commands import pipeline

    monkeypatch.setattr(pipeline, "CHUNK_ROWS", 64)  # a design of 200 runs in four slices
    study = write_study(study_dir, DESIGNED.replace(
        "PARAMETERS", "{a: {distribution: discrete, values: [1, 2, 3]}, "
                      "b: {distribution: discrete, values: [0.5, 1.5]}}")
        .replace("SAMPLING", "random") + "    execution: {scheduler: sync}\n")
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    distinct = stored_runs(study_dir / "out")["run.id"].nunique()
    assert (result.analysis["runs"]["reused"], distinct) == (0, 200)


def test_an_empty_matrix_has_no_ids():
    """An iterative analysis may ask for no rows: that is no runs, not an error."""
    assert hash_rows(np.zeros((0, 2)), b"context").shape == (0,)
    assert hash_rows(np.zeros((0, 2)), b"context", Occurrences()).dtype == np.int64
