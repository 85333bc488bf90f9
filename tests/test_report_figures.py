"""The report's figures: laid out as tight_layout lays them out, drawn without pyplot,
and bounded in what they draw whatever the number of runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from studyrun.core.design import Design, Outcome
from studyrun.results.report.figures import (
    SCATTER_POINTS,
    Figures,
    lay_out,
    shown_rows,
)

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ("left", "right", "bottom", "top", "wspace", "hspace")


def hist_with_title(figures):
    fig, ax = figures.new()
    ax.hist(np.random.default_rng(1).normal(800, 90, 1000), bins=30, histtype="stepfilled")
    ax.set(xlabel="final_area", ylabel="runs", title="Distribution of final_area")
    return fig


def scatter_row(figures):
    rng = np.random.default_rng(2)
    fig, axes = figures.new(1, 3, size=(9.6, 3.2))
    for j, ax in enumerate(np.ravel(axes)):
        ax.scatter(rng.uniform(0.8, 1.2, 500), rng.normal(-0.002, 0.001, 500), s=4)
        ax.set(xlabel=f"a_long_parameter_name_{j}", ylabel="y" if j == 0 else "")
    return fig


def bars_rotated_with_legend(figures):
    fig, ax = figures.new(size=(9.0, 3.6))
    x = np.arange(8)
    ax.bar(x - 0.2, np.linspace(0, 0.6, 8), 0.4, yerr=0.05, capsize=3, label="S1")
    ax.bar(x + 0.2, np.linspace(0.1, 0.7, 8), 0.4, label="ST")
    ax.set_xticks(x, [f"parameter_{i}" for i in x], rotation=30)
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_title("Sobol' indices: y")
    ax.legend()
    return fig


def grid_2x2(figures):
    rng = np.random.default_rng(3)
    fig, axes = figures.new(2, 2, size=(5.2, 5.2))
    for i in range(2):
        for j in range(2):
            if i == j:
                axes[i][j].hist(rng.gamma(2.0, 1e4, 800), bins=30)
            else:
                axes[i][j].plot(rng.normal(size=800), rng.normal(size=800) * 50, ".", ms=1.5)
            axes[i][j].set(xlabel="b" if i == 1 else "", ylabel="a" if j == 0 else "")
    return fig


def lines_with_legend(figures):
    fig, axes = figures.new(1, 2, size=(11.0, 3.8))
    left, right = axes[0]
    t = np.linspace(0, 100, 50)
    for k in range(3):
        left.plot(t, np.exp(-t / (10 * (k + 1))), label=f"k={k}")
    left.legend(fontsize="small")
    right.bar(np.arange(3), [1e5, -2e5, 3e5], width=0.4)
    right.set_ylabel("negative and large")
    return fig


def bare_axes(figures):
    fig, ax = figures.new()
    ax.plot([0, 1], [0, 1])
    return fig


def annotated(figures):  # not a plain grid: matplotlib's own tight layout does it
    fig, ax = figures.new()
    ax.errorbar([1, 2], [3, 4], xerr=[0.1, 0.2], fmt="o")
    ax.annotate("x1", (2, 4), textcoords="offset points", xytext=(4, 4))
    return fig


def with_colorbar(figures):
    fig, ax = figures.new(size=(5.5, 4.5))
    g = np.linspace(-1, 1, 11)
    shown = ax.contourf(g, g, np.add.outer(g, g), levels=5)
    fig.colorbar(shown, ax=ax, label="fitted y")
    ax.plot([0, 1], [0, 1], "k.", clip_on=False)
    return fig


def offset_text(figures):
    fig, ax = figures.new()
    ax.plot([1e6, 1e6 + 1], [1, 2])
    return fig


PLAIN = [hist_with_title, scatter_row, bars_rotated_with_legend, grid_2x2, lines_with_legend,
         bare_axes]
OTHER = [annotated, with_colorbar, offset_text]


def tight_params(make, tmp_path):
    """The subplot parameters fig.tight_layout() gives."""
    fig = make(Figures(tmp_path))
    fig.tight_layout()
    return {k: getattr(fig.subplotpars, k) for k in PARAMS}


@pytest.mark.slow
@pytest.mark.parametrize("make", PLAIN + OTHER)
def test_figures_are_laid_out_as_tight_layout_lays_them_out(make, tmp_path):
    fig = make(Figures(tmp_path))
    lay_out(fig)
    ours = {k: getattr(fig.subplotpars, k) for k in PARAMS}
    assert ours == pytest.approx(tight_params(make, tmp_path), rel=0, abs=1e-12)


def test_a_saved_figure_is_the_tight_layout_one_pixel_for_pixel(tmp_path):
    from PIL import Image

    figures = Figures(tmp_path / "figures")
    figures.save(scatter_row(figures), "ours")
    fig = scatter_row(figures)
    fig.tight_layout()
    fig.savefig(tmp_path / "figures" / "theirs.png", dpi=110)
    ours, theirs = (np.asarray(Image.open(tmp_path / "figures" / f"{n}.png")) for n in ("ours", "theirs"))
    assert np.array_equal(ours, theirs)


def test_shown_rows_are_bounded_sorted_and_the_same_every_time():
    assert list(shown_rows(10, 20)) == list(range(10))
    assert list(shown_rows(10, 4, prefix=True)) == [0, 1, 2, 3]
    rows = shown_rows(100_000, 500)
    assert len(rows) == 500 == len(set(rows)) and np.all(np.diff(rows) > 0)
    assert rows.max() > 90_000  # spread over the runs, not the first 500
    assert np.array_equal(rows, shown_rows(100_000, 500))


class Keep(Figures):
    """Figures that keeps what it was asked to save."""

    def __init__(self, folder):
        super().__init__(folder)
        self.saved = {}

    def save(self, fig, name, caption=""):
        self.saved[name] = fig
        return super().save(fig, name, caption)


def test_montecarlo_figures_draw_the_same_whatever_the_number_of_runs(tmp_path):
    from studyrun.analyses.montecarlo import draw_distributions

    rng = np.random.default_rng(4)
    n = 3 * SCATTER_POINTS
    matrix = rng.uniform(size=(n, 2))
    y = matrix @ [1.0, 2.0]
    ok = np.ones(n, dtype=bool)
    ok[0] = False  # a failed run is neither counted nor shown
    figures = Keep(tmp_path / "figures")
    lines = draw_distributions(Outcome(Design(["a", "b"], matrix), {"y": y}, ok), figures)
    assert "![Distribution of y](figures/hist-y.png)" in lines
    hist = figures.saved["hist-y"].axes[0]
    assert len(hist.patches) == 1  # one filled outline, not a patch per bar
    for ax in figures.saved["scatter-y"].axes:
        offsets = ax.collections[0].get_offsets()
        assert len(offsets) == SCATTER_POINTS
        assert offsets[0][1] == y[1]  # the first runs that succeeded, in run order
    assert (tmp_path / "figures" / "scatter-y.png").exists()
    # the SVG holds each dense cloud as one picture, its axes and text as vectors
    svg = (tmp_path / "figures" / "scatter-y.svg").read_text()
    assert svg.count("<image ") == 2 and 'id="text_' in svg  # tick labels drawn as paths
    assert len(svg) < 300_000  # 2.2 MB with a vector element per marker


def test_a_scatter_with_tooltips_stays_vector_whatever_its_size(tmp_path):
    from studyrun.results.report.figures import RASTER_POINTS

    figures = Figures(tmp_path)
    fig, ax = figures.new()
    points = ax.scatter(np.arange(2 * RASTER_POINTS), np.arange(2 * RASTER_POINTS))
    figures.tip(points, "every point")
    figures.save(fig, "tipped")
    svg = (tmp_path / "tipped.svg").read_text()
    assert "<image " not in svg and 'class="tip"' in svg


def test_sweep_draws_one_line_per_combination_of_the_other_parameters(tmp_path):
    from studyrun.analyses.sweep import draw_lines

    grid = np.array([[a, b, c] for a in (1.0, 2.0, 3.0) for b in (0.5, 0.0) for c in (7.0, 8.0)])
    values = (grid[:, 0] * 10 + grid[:, 2]).tolist()
    values[1] = None  # a failed run leaves a gap
    figures = Keep(tmp_path / "figures")
    outcome = Outcome(Design(["a", "b", "c"], grid), {}, np.ones(len(grid), dtype=bool))
    draw_lines(outcome, {"results": {"y": {"values": values}}}, figures)
    lines = figures.saved["sweep-y"].axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["b=0.5, c=7", "b=0.5, c=8", "b=0, c=7",
                                                    "b=0, c=8"]
    assert list(lines[0].get_xdata()) == [1.0, 2.0, 3.0]
    assert list(lines[0].get_ydata()) == [17.0, 27.0, 37.0]
    assert np.isnan(lines[1].get_ydata()[0])


@pytest.mark.slow
def test_the_report_never_imports_pyplot_and_validation_never_imports_matplotlib(tmp_path):
    code = f"""
import sys
import studyrun
from studyrun.results.report.figures import Figures
studyrun.load({str(ROOT / 'studies' / 'ishigami-sobol.yaml')!r})
assert not any(m.startswith("matplotlib") for m in sys.modules), "validation loaded matplotlib"
figures = Figures({str(tmp_path)!r})
fig, ax = figures.new()
ax.plot([0, 1], [0, 1])
figures.save(fig, "line")
assert "matplotlib.pyplot" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert (tmp_path / "line.png").exists()


EXTREME = """
name: extreme
model: {type: python, function: "extreme:f", vectorized: true}
parameters:
  a: PARAMETER
  b: {bounds: [0, 1]}
analysis: ANALYSIS
execution: {scheduler: sync}
"""


@pytest.mark.slow
@pytest.mark.parametrize("parameter, output, analysis, drawn", [
    ("{bounds: [1e308, 1.7e308]}", "b", "{type: montecarlo, samples: 10}", "scatter-y"),
    ("{bounds: [1e308, 1.7e308]}", "b", "{type: doe, design: ccd}", "doe_y_contour"),
    ("{bounds: [-1, 1]}", "a * 1.7e308", "{type: montecarlo, samples: 10}", None),
])
def test_values_near_the_float_limit_finish_with_a_note_for_what_cannot_be_drawn(
        tmp_path, parameter, output, analysis, drawn):
    """Bounds [1e308, 1.7e308]: every run succeeded, then the report's figures raised
    ValueError. The study finishes; what matplotlib or numpy cannot draw is a note instead."""
    from conftest import run_cli

    (tmp_path / "extreme.py").write_text(f"def f(a, b):\n    return {{'y': {output} + 0 * b}}\n")
    study = tmp_path / "study.yaml"
    study.write_text(EXTREME.replace("PARAMETER", parameter).replace("ANALYSIS", analysis))
    done = run_cli("run", study, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "runs succeeded (0 failed" in done.stdout
    report = (tmp_path / "out" / "report.md").read_text()
    if drawn:
        assert f"*Figure {drawn} not drawn: matplotlib cannot draw these values" in report
        assert f"studyrun: warning: figure {drawn} not drawn: " in done.stderr
    else:
        assert "section could not be drawn" in report
        assert "studyrun: warning: the report's montecarlo section was not drawn" in done.stderr


# What makes the drawing cheaper (`blank`'s template, `fix_ticks`) must draw the same bytes.

def log_and_categories(figures):
    fig, axes = figures.new(1, 2, size=(8.0, 3.2))
    left, right = axes[0]
    left.loglog([1e-3, 1.0, 1e4], [2.0, 3e2, 5e5])
    right.bar(["low", "middle", "high"], [3, -1, 2])
    right.set_title("categories")
    return fig


class Fresh(Figures):
    """Figures made as matplotlib makes them, with no template."""

    def new(self, nrows=1, ncols=1, size=(6.0, 4.0)):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=size)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, squeeze=nrows * ncols == 1)


def drawn(fig) -> bytes:
    """The figure's SVG as Figures.save writes it (ticks, labels and offsets are in it as in the
    PNG, which is drawn from the same state)."""
    import io

    import matplotlib

    from studyrun.results.report.figures import DPI

    svg = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "studyrun"}):
        fig.savefig(svg, format="svg", dpi=DPI, metadata={"Date": None})
    return svg.getvalue()


@pytest.mark.parametrize("make", [bars_rotated_with_legend, grid_2x2, with_colorbar, offset_text,
                                  log_and_categories])
def test_ticks_fixed_once_laid_out_draw_what_matplotlib_draws(make, tmp_path):
    from studyrun.results.report.figures import ticks_fixed

    fig = make(Figures(tmp_path))
    lay_out(fig)
    theirs = drawn(fig)
    own = [(t.locator, t.formatter) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
           for t in (axis.major, axis.minor)]
    with ticks_fixed(fig):
        assert drawn(fig) == theirs
    assert own == [(t.locator, t.formatter) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                   for t in (axis.major, axis.minor)]  # the figure's own, back


def test_a_figure_changed_and_saved_again_ticks_anew(tmp_path):
    figures = Figures(tmp_path)
    fig = offset_text(figures)
    figures.save(fig, "first")
    fig.axes[0].set_xlim(0, 3)  # no offset, other ticks
    figures.save(fig, "again")
    other = Fresh(tmp_path)
    fresh = offset_text(other)
    fresh.axes[0].set_xlim(0, 3)
    lay_out(fresh)
    assert (tmp_path / "again.svg").read_bytes() == drawn(fresh)


@pytest.mark.parametrize("make", [hist_with_title, lines_with_legend])
def test_a_figure_copied_from_the_template_draws_as_a_new_one(make, tmp_path):
    from studyrun.results.report.figures import _TEMPLATES

    for _ in range(2):  # the first made afresh, then the template, changed by drawing
        fig = make(Figures(tmp_path))
    assert _TEMPLATES[fig.axes[0].get_subplotspec().get_gridspec().get_geometry()][1]
    figures = [make(kind(tmp_path)) for kind in (Figures, Fresh)]
    for fig in figures:
        lay_out(fig)
    assert drawn(figures[0]) == drawn(figures[1])


def test_the_template_follows_the_users_matplotlib_settings(tmp_path):
    import matplotlib

    from studyrun.results.report.figures import blank

    blank(1, 1).axes[0].set_title("changed")
    blank(1, 1).axes[0].set_title("changed")  # a copy of the template
    with matplotlib.rc_context({"axes.facecolor": "0.5", "xtick.labelsize": 14}):
        ax = blank(1, 1).axes[0]
        assert matplotlib.colors.to_hex(ax.get_facecolor()) == "#808080"
        assert ax.xaxis.get_major_ticks()[3].label1.get_fontsize() == 14
    ax = blank(1, 1).axes[0]
    assert matplotlib.colors.to_hex(ax.get_facecolor()) == "#ffffff" and not ax.get_title()
    assert ax.xaxis.get_major_ticks()[3].label1.get_fontsize() == 10


def test_the_templates_kept_are_few_and_small(tmp_path, monkeypatch):
    import matplotlib
    from matplotlib import patheffects

    from studyrun.results.report import figures

    monkeypatch.setattr(figures, "_TEMPLATES", {})
    monkeypatch.setattr(figures, "TEMPLATES", 2)
    monkeypatch.setattr(figures, "TEMPLATE_AXES", 2)
    for grid in [(1, 1), (1, 2), (2, 1), (2, 2)]:
        assert len(figures.blank(*grid).axes) == grid[0] * grid[1]
    assert list(figures._TEMPLATES) == [(1, 2), (2, 1)]  # the oldest went; 2 x 2 is too big

    class Unpicklable(patheffects.AbstractPathEffect):  # a style pickle cannot copy
        def draw_path(self, renderer, gc, tpath, affine, rgbFace=None):
            renderer.draw_path(gc, tpath, affine, rgbFace)

    with matplotlib.rc_context({"path.effects": [Unpicklable()]}):
        for _ in range(2):  # the second would make the template
            fig = figures.blank(1, 2)
            assert isinstance(fig.axes[0].patch.get_path_effects()[0], Unpicklable)
        assert figures._TEMPLATES[(1, 2)][1] is None


def test_a_report_sets_the_objects_held_before_apart_from_the_collector(tmp_path):
    """Drawing set off full collections that went through every object of the process; while a
    report is drawn the objects held before are frozen (gc.freeze), and unfrozen after. A program
    that froze objects or disabled the collector itself finds them as it left them."""
    import gc

    from conftest import run_example

    from studyrun.results.report.figures import old_objects_frozen

    seen = []

    def note(phase, info):
        if phase == "start":
            seen.append(gc.get_freeze_count())

    assert gc.isenabled() and not gc.get_freeze_count()
    gc.callbacks.append(note)
    try:
        run_example(tmp_path, "ishigami-montecarlo", **{"samples: 10000": "samples: 16"})
    finally:
        gc.callbacks.remove(note)
    assert (tmp_path / "out" / "figures" / "hist-y.svg").exists()
    assert any(count > 0 for count in seen)  # collections while drawing skipped them
    assert not gc.get_freeze_count() and gc.isenabled()
    try:
        gc.freeze()  # the program's own: left frozen
        with old_objects_frozen():
            pass
        assert gc.get_freeze_count() and gc.isenabled()
        gc.unfreeze()
        gc.disable()  # the program's own: left disabled, nothing frozen
        with old_objects_frozen():
            assert not gc.get_freeze_count()
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
