"""Figures for report.md, drawn with matplotlib's Agg renderer into figures/.

Figures are plain `matplotlib.figure.Figure` objects on an Agg canvas: pyplot is never imported,
so the report neither pays for pyplot's figure manager nor changes the backend of a program
that calls studyrun. matplotlib is imported on the first figure, so validation and the other
commands never load it.

`save` lays a figure out with matplotlib's tight layout engine, run once (`lay_out`);
benchmarks/bench_layout.py measured a copy of its arithmetic that measured each figure's texts
only once, and it saved less than a fifth of a report's drawing time (docs/performance.md).
What is cheaper draws the same bytes (benchmarks/bench_report.py): figures copied from a
template (`blank`), ticks fixed once laid out (`ticks_fixed`), the process's older objects set
apart from the garbage collector while a report is drawn (`old_objects_frozen`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import re
import warnings
from pathlib import Path

import numpy as np

from studyrun.core.text import one_line
from studyrun.results.report import wide
from studyrun.results.report.markdown import escape

# Most points a scatter shows; a denser cloud reads the same and only costs drawing time.
SCATTER_POINTS = 5000
# A collection of more markers than this is drawn into the SVG as one picture (at DPI), as in
# the PNG: a vector element per marker made the SVG 2 MB and cost a second to write.
RASTER_POINTS = 1000
DPI = 110
PNG = {"compress_level": 1}  # zlib level 1: lossless, as small as level 6 here and ~3x faster
PAD = 1.08  # tight_layout's padding, in units of the font size
# `blank`'s templates: a template's axes hold TICKS ticks on each axis (matplotlib's locators
# give at most 11 or 12; more are made as they are needed); at most TEMPLATES grids of at most
# TEMPLATE_AXES axes are kept, about 110 KB an axes.
TICKS = 12
TEMPLATES = 8
TEMPLATE_AXES = 8
_TEMPLATES: dict[tuple[int, int], tuple[dict, bytes | None]] = {}  # None: one made, no template


class Figures:
    """Saves matplotlib figures under one folder and returns their Markdown links; draws the
    figures of the first QUANTITIES_DRAWN quantities only (`draws`)."""

    def __init__(self, folder: Path, quantities: int | None = None) -> None:
        self.folder = Path(folder)
        self._names: dict[str, str] = {}  # file names saved, by their lower case
        self._tips: dict[str, str] = {}  # the next figure's artists' gids -> their tooltips
        self._quantities = wide.QUANTITIES_DRAWN if quantities is None else quantities
        self.drawn: dict[str, None] = {}  # the quantities whose figures are drawn, in order
        self.left_out: dict[str, None] = {}  # and those whose are not

    def draws(self, quantity: str) -> bool:
        """Whether the report draws the figures of this quantity (or output): every one of the
        first `quantities` asked about, none of the others, whose results only the tables show.
        Hundreds of quantities drew thousands of figures in minutes, which nobody reads."""
        if quantity in self.drawn or (quantity not in self.left_out
                                      and len(self.drawn) < self._quantities):
            self.drawn[quantity] = None
            return True
        self.left_out[quantity] = None
        return False

    def note(self) -> str:
        """What the figures leave out, in one sentence; empty when they show every quantity."""
        if not self.left_out:
            return ""
        total = len(self.drawn) + len(self.left_out)
        return (f"*The figures show the first {len(self.drawn)} of the {total:,} quantities; "
                "the tables list every one.*")

    def tip(self, artist, text: str) -> None:
        """A tooltip for one drawn element (a bar, a point) of the figure being made: report.html
        shows it when the pointer rests on the element (an SVG <title>)."""
        gid = f"tip-{len(self._tips)}"
        artist.set_gid(gid)
        self._tips[gid] = text

    def new(self, nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (6.0, 4.0)):
        """A new (figure, axes) pair, as pyplot.subplots(squeeze=...) returns it."""
        fig = blank(nrows, ncols)
        fig.set_size_inches(size)
        axes = np.array(fig.axes, dtype=object).reshape(nrows, ncols)
        return fig, axes[0, 0] if nrows * ncols == 1 else axes

    def save(self, fig, name: str, caption: str = "") -> str:
        """Lay the figure out as tight_layout does, write figures/<name>.png (for report.md)
        and figures/<name>.svg (inlined in report.html) and return a Markdown image line."""
        import matplotlib

        from studyrun.results.outputs import replacing

        name = self.unique(name)
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            lay_out(fig)
            rasterize_dense(fig)
            with ticks_fixed(fig):
                with replacing(self.folder / f"{name}.png") as temporary:
                    fig.savefig(temporary, format="png", dpi=DPI, pil_kwargs=PNG)
                # the same bytes for the same figure: no date, ids hashed with a fixed salt
                with matplotlib.rc_context({"svg.hashsalt": "studyrun"}), \
                        replacing(self.folder / f"{name}.svg") as temporary:
                    fig.savefig(temporary, format="svg", dpi=DPI, metadata={"Date": None})
                    if self._tips:
                        temporary.write_text(with_titles(temporary.read_text(), self._tips))
        except (ValueError, OverflowError) as error:  # ticks across values near 1.8e308
            return not_drawn(name, error)
        finally:
            self._tips = {}
        return f"![{escape(caption or name)}](figures/{name}.png)"

    def unique(self, name: str) -> str:
        """The name as a file name (`file_name`), with `-2` (`-3`, ...) after it when it differs
        from one saved before only in case (quantities `K` and `k`): one file would overwrite the
        other on a file system that ignores case (macOS, Windows)."""
        name = file_name(name)
        unique, k = name, 1
        while self._names.get(unique.lower(), unique) != unique:
            k += 1
            unique = f"{name}-{k}"
        self._names[unique.lower()] = unique
        return unique


def blank(nrows: int, ncols: int):
    """A figure of nrows x ncols axes on an Agg canvas, as matplotlib makes it. From the second
    of a grid on, under the same rcParams, a copy (unpickled) of a template whose axes hold
    TICKS ticks: making the axes and their ticks afresh was a fifth of drawing a small figure,
    and a copy of the same state costs a third of that and draws the same bytes. The first is
    made afresh: a process that draws one figure of a grid would only pay for the template."""
    import pickle

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # a user's style or matplotlibrc as it is now, read as stored: rcParams["backend"] would
    # resolve the backend, importing pyplot
    settings = dict(dict.items(matplotlib.rcParams))
    made = _TEMPLATES.get((nrows, ncols))
    if made is None or made[0] != settings or made[1] is None:
        fig = Figure()
        fig.subplots(nrows, ncols)
        if made is None or made[0] != settings:  # the first of its kind
            FigureCanvasAgg(fig)
            return remember(nrows, ncols, (settings, None), fig)
        for ax in fig.axes:
            ax.xaxis.get_major_ticks(TICKS)
            ax.yaxis.get_major_ticks(TICKS)
        try:
            made = remember(nrows, ncols, (settings, pickle.dumps(fig, pickle.HIGHEST_PROTOCOL)))
        except (pickle.PicklingError, TypeError, AttributeError):  # a style holding what
            FigureCanvasAgg(fig)                                  # pickle cannot copy
            return fig
    fig = pickle.loads(made[1])  # bytes this process made above, never read from elsewhere
    FigureCanvasAgg(fig)
    return fig


def remember(nrows: int, ncols: int, made: tuple, result=None):
    """Keep `made` as the grid's template (at most TEMPLATES, of at most TEMPLATE_AXES axes, the
    oldest going first); return `result`, or `made`."""
    if nrows * ncols <= TEMPLATE_AXES:
        _TEMPLATES.pop((nrows, ncols), None)
        while len(_TEMPLATES) >= TEMPLATES:
            _TEMPLATES.pop(next(iter(_TEMPLATES), None), None)
        _TEMPLATES[(nrows, ncols)] = made
    return made if result is None else result


@contextlib.contextmanager
def old_objects_frozen():
    """The objects the process holds before a report is drawn set aside from Python's cyclic
    garbage collector (gc.freeze) until it is drawn: drawing makes objects by the hundred
    thousand, which set off full collections that went through every object of the process,
    0.05-0.25 s each. The collector still frees each figure's garbage as before."""
    if gc.get_freeze_count() or not gc.isenabled():  # the program's own choices: left alone
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def file_name(name: str) -> str:
    """A figure's name as a file name of letters, digits, `_`, `.` and `-` (a run of anything else
    one `_`), not starting with `.`; a long name cut, with a digest of the whole: a quantity's
    name from a crafted results folder may hold `/`, `..` or anything else."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    safe = "_" + safe[1:] if safe.startswith(".") else safe
    if len(safe) > 100:
        safe = f"{safe[:80]}-{hashlib.sha256(name.encode('utf-8', 'replace')).hexdigest()[:12]}"
    return safe or "figure"


def rasterize_dense(fig) -> None:
    """Marks every collection of more than RASTER_POINTS markers, but those with tooltips, to be
    drawn as a picture in vector output; axes, ticks and text stay vectors."""
    for ax in fig.axes:
        for collection in ax.collections:
            if collection.get_gid() is None and len(collection.get_offsets()) > RASTER_POINTS:
                collection.set_rasterized(True)


def with_titles(svg: str, tips: dict[str, str]) -> str:
    """The SVG with a <title> (a tooltip) first in each group whose id has a tip."""
    from html import escape

    for gid, text in tips.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}" class="tip"><title>{escape(text)}</title>', 1)
    return svg


def not_drawn(name: str, error: Exception) -> str:
    """The report's line for a figure matplotlib could not draw (axes spanning values near the
    float limit, 1e308): the numbers are in analysis.json and runs.csv all the same."""
    import sys

    print(f"studyrun: warning: figure {name} not drawn: {one_line(str(error))}", file=sys.stderr)
    return (f"*Figure {name} not drawn: matplotlib cannot draw these values ({escape(error)}); "
            "they are in analysis.json and runs.csv.*")


def lay_out(fig) -> None:
    """fig.tight_layout()'s subplot parameters, measured once."""
    from matplotlib.layout_engine import TightLayoutEngine

    # rect=None measures once (the default rect (0, 0, 1, 1) measures twice, to the same
    # margins up to a rounding error); running the engine without setting it on the figure
    # leaves no placeholder engine behind for savefig to measure the figure again. Labels too
    # long to fit (a crafted name) leave the layout as it is, drawn, with no Python warning.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        TightLayoutEngine(pad=PAD, rect=None).execute(fig)


@contextlib.contextmanager
def ticks_fixed(fig):
    """Each axis's ticks and labels as laid out, fixed for the two drawings that follow (PNG,
    SVG): matplotlib would run every locator and formatter again several times a drawing, to
    the same result, as nothing moves once the figure is laid out. The figure's own locators
    and formatters are back after (a figure changed and saved again ticks anew)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    kept = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for ticker, ticks in ((axis.major, axis.get_majorticklocs),
                                  (axis.minor, axis.get_minorticklocs)):
                locs = ticks()
                fixed = FixedFormatter(ticker.formatter.format_ticks(locs))
                fixed.set_offset_string(ticker.formatter.get_offset())
                kept.append((ticker, ticker.locator, ticker.formatter))
                ticker.locator, ticker.formatter = FixedLocator(locs), fixed
    try:
        yield
    finally:
        for ticker, locator, formatter in reversed(kept):  # shared axes share a ticker
            ticker.locator, ticker.formatter = locator, formatter


def shown_rows(n: int, cap: int = SCATTER_POINTS, *, prefix: bool = False) -> np.ndarray:
    """At most `cap` of `n` row indices, in increasing order, the same on every call.

    `prefix` takes the first `cap`: right for a sampled design, whose prefix is itself a sample
    (a strided subset of a Sobol' sequence would not be: every other point of it lies in one
    half of the first input). Otherwise rows are drawn with a fixed seed, so a structured design
    (a grid, a factorial in standard order) is not cut to one corner."""
    if n <= cap:
        return np.arange(n)
    if prefix:
        return np.arange(cap)
    return np.sort(np.random.default_rng(0).choice(n, size=cap, replace=False))
