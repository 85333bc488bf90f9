"""Reports of a thousand parameters: figures of the 20 that matter most by the analysis's own
measure, a table of every one (largest first), and results the same as for a narrow study."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from studyrun.results.report.figures import Figures
from studyrun.results.report.wide import TOP, ranked, shown, table_order, top_note

WIDTH = 1000
NAMES = [f"x{i:04d}" for i in range(1, WIDTH + 1)]
MODEL = """
import numpy as np

def linear(**inputs):
    names = sorted(inputs)
    weights = np.where(np.arange(len(names)) < 5, 10.0 - np.arange(len(names)), 1e-3)
    return sum(w * inputs[n] for w, n in zip(weights, names))
"""


class Keep(Figures):
    """Figures that keeps what it was asked to save."""

    def __init__(self, folder):
        super().__init__(folder)
        self.saved = {}

    def save(self, fig, name, caption=""):
        self.saved[name] = fig
        return super().save(fig, name, caption)


def table_rows(report: str, header: str) -> list[str]:
    """The first column of the Markdown table that starts with `header`."""
    lines = report[report.index(header):].splitlines()[2:]
    return [line.split(" | ")[0].strip("| ") for line in lines[:lines.index("")]]


def test_which_parameters_a_figure_shows_and_in_what_order_a_table_lists_them():
    few = {"b": 0.1, "a": -0.9, "c": None}
    assert shown(few) == table_order(few) == ["b", "a", "c"] and top_note(few, "ST") == ""
    many = {f"p{i}": (None if i == 3 else float("nan") if i == 4 else (-1) ** i * i)
            for i in range(TOP + 5)}
    assert ranked(many)[:3] == ["p24", "p23", "p22"]  # by |value|, the sign aside
    assert ranked(many)[-2:] == ["p3", "p4"]  # None and NaN last, in their order
    assert shown(many) == ranked(many)[:TOP] and table_order(many) == ranked(many)
    assert f"the {TOP} parameters of largest ST of the 25" in top_note(many, "ST")


def test_a_thousand_parameter_montecarlo_draws_the_top_20_and_tables_every_parameter(tmp_path):
    import studyrun

    (tmp_path / "wide.py").write_text(MODEL)
    parameters = "\n".join(f"  {name}: {{bounds: [0, 1]}}" for name in NAMES)
    (tmp_path / "study.yaml").write_text(
        "name: wide\nmodel: {type: python, function: 'wide:linear', vectorized: true}\n"
        f"parameters:\n{parameters}\nquantities: {{y: value}}\n"
        "analysis: {type: montecarlo, samples: 40}\nexecution: {scheduler: sync}\n")
    studyrun.run(tmp_path / "study.yaml", tmp_path / "out")
    out = tmp_path / "out"
    correlations = json.loads((out / "analysis.json").read_text())["results"]["y"]["correlations"]
    assert list(correlations) == NAMES  # every parameter's, in study order, as before

    from scipy.stats import spearmanr

    runs = np.genfromtxt(out / "runs.csv", delimiter=",", names=True, usecols=[*NAMES, "y"])
    for name in NAMES:
        assert correlations[name] == pytest.approx(spearmanr(runs[name], runs["y"]).statistic,
                                                   abs=1e-12)
    report = (out / "report.md").read_text()
    assert "The figures show the 20 parameters of largest |Spearman| of the 1,000" in report
    rows = table_rows(report, "| parameter | y |")
    assert sorted(rows) == NAMES
    assert rows[:5] == ranked({n: correlations[n] for n in NAMES})[:5]
    assert "![y against the 20 parameters of largest |Spearman|](figures/scatter-y.png)" in report
    with Image.open(out / "figures" / "scatter-y.png") as image:
        assert image.size == (5 * 352, 4 * 352)  # 20 panels of 3.2 in at 110 dpi, rows of 5


def wide_entry(rng, keys: tuple[str, ...]) -> dict:
    values = {key: dict(zip(NAMES, rng.uniform(0, 0.01, WIDTH))) for key in keys}
    for key in keys:
        values[key]["x0500"] = 0.9  # the one that matters
    return values


def test_morris_and_sobol_figures_of_a_thousand_parameters_show_the_top_20(tmp_path):
    from studyrun.analyses.morris import KEYS, Morris
    from studyrun.analyses.sobol.report import write_report

    rng = np.random.default_rng(5)
    morris = wide_entry(rng, KEYS)
    figures = Keep(tmp_path / "figures")
    text = Morris(type="morris").report({"results": {"y": morris}}, None, figures)
    plane = figures.saved["morris-y"].axes[0]
    assert len(plane.texts) == TOP  # a label per parameter drawn
    assert "the 20 parameters of largest mu_star of the 1,000" in text
    rows = table_rows(text, "| parameter | mu |")
    assert rows[0] == "x0500" and rows == ranked(morris["mu_star"]) and len(rows) == WIDTH

    sobol = wide_entry(rng, ("S1", "S1_conf", "ST", "ST_conf"))
    sobol["convergence"] = {"N": [16, 32, 64], "S1": {n: [0.1] * 3 for n in NAMES},
                            "ST": {n: [0.2] * 3 for n in NAMES}}
    figures = Keep(tmp_path / "figures")
    text = write_report({"results": {"y": sobol}}, figures)
    bars = figures.saved["sobol-y"].axes[0]
    assert [t.get_text() for t in bars.get_xticklabels()] == ranked(sobol["ST"])[:TOP]
    assert len(figures.saved["sobol-y-convergence"].axes[0].get_lines()) == 2 * TOP
    assert "the 20 parameters of largest ST of the 1,000" in text
    assert table_rows(text, "| parameter | S1 |") == ranked(sobol["ST"])
