"""core/arrow.py: pyarrow arrays made from numpy and strings, and read back, equal to what
pyarrow.array and to_numpy give, without pyarrow importing pandas (issue 33)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from studyrun.core import arrow


def test_arrays_made_from_numpy_and_strings_equal_pyarrows_own():
    values = np.array([0.5, -0.0, np.inf, 1e-300])
    assert arrow.numeric(values).equals(pa.array(values))
    assert arrow.numeric(np.arange(5)[::2]).to_pylist() == [0, 2, 4]  # a strided view: copied
    flags = np.array([True, False, True] * 5)
    assert arrow.boolean(flags).equals(pa.array(flags))
    texts = ["", "\u2713 \u00e9", "a,b", "x" * 1000]
    assert arrow.strings(texts).equals(pa.array(texts, pa.string()))
    assert arrow.strings([]).to_pylist() == [] and arrow.text(",").as_py() == ","


def test_float_values_of_chunks_and_slices_equal_to_numpy():
    first, second = pa.array(np.arange(6.0)), pa.array(np.arange(6.0, 9.0))
    chunked = pa.chunked_array([first.slice(2, 3), second])
    assert arrow.float_values(chunked).tolist() == [2.0, 3.0, 4.0, 6.0, 7.0, 8.0]
    assert arrow.float_values(first.slice(4)).tolist() == [4.0, 5.0]
    with pytest.raises(ValueError):
        arrow.float_values(pa.array([1.0, None]))  # a null is no number


def test_distinct_codes_number_each_distinct_value_once_in_runs_of_equal_values():
    errors = np.array([None, None, "a", "a", None, "b", "a"], object)
    distinct, codes = arrow.distinct_codes(errors)
    assert [distinct[c] for c in codes] == errors.tolist() and len(distinct) == 3
    durations = np.array([np.nan, np.nan, 0.5, 0.5, np.nan])
    distinct, codes = arrow.distinct_codes(durations)
    assert codes.tolist() == [0, 0, 1, 1, 2] and np.isnan(distinct[0])
    distinct, codes = arrow.distinct_codes(np.zeros(0, object))
    assert distinct == [] and len(codes) == 0
