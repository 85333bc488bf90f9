"""Figures for report.md, drawn with matplotlib's Agg renderer into figures/.

Figures are plain `matplotlib.figure.Figure` objects on an Agg canvas: pyplot is never imported,
so the report neither pays for pyplot's figure manager nor changes the backend of a program
that calls studyrun. matplotlib is imported on the first figure, so validation and the other
commands never load it.

Laying a figure out cost more than drawing it: `tight_layout()` updates every axis' ticks some
ten times while it measures, measures everything twice for its default `rect`, and leaves a
placeholder layout engine that makes savefig measure the figure once more. `save` computes the
same subplot parameters, bit for bit, from one measurement of the ticks, labels and titles
(`grid_layout`), and falls back to matplotlib's tight layout, measured once, for figures with
anything else around their axes (colour bars, annotations, offset texts, unclipped artists).
"""

from __future__ import annotations

import hashlib
import re
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
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=size)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, squeeze=nrows * ncols == 1)

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
    """fig.tight_layout()'s subplot parameters, without its repeated measuring."""
    from matplotlib.layout_engine import TightLayoutEngine

    params = grid_layout(fig)
    if params is None:
        # rect=None measures once (the default rect (0, 0, 1, 1) measures twice, to the same
        # margins up to a rounding error); running the engine without setting it on the
        # figure leaves no placeholder engine behind for savefig to measure the figure again.
        TightLayoutEngine(pad=PAD, rect=None).execute(fig)
    elif params:
        fig.subplots_adjust(**params)


def grid_layout(fig) -> dict[str, float] | None:
    """tight_layout's subplot parameters for a grid of plain axes (one per cell; tick labels,
    axis labels, a centred title, clipped artists and legends anchored to the axes), from one
    measurement of each axes' texts; None for any other figure."""
    axes = fig.axes
    specs = [ax.get_subplotspec() for ax in axes]
    if not axes or any(s is None for s in specs):
        return None
    grid = specs[0].get_gridspec()
    cells = {(s.rowspan.start, s.colspan.start) for s in specs}
    figure_texts = [getattr(fig, f"get_{t}", None) for t in ("suptitle", "supxlabel", "supylabel")]
    if (any(s.get_gridspec() is not grid or len(s.rowspan) != 1 or len(s.colspan) != 1
            for s in specs) or len(cells) != len(axes)
            or any(get is None or get() for get in figure_texts)):
        return None  # spanning or stacked axes, or figure-level titles and labels
    renderer = fig.canvas.get_renderer()
    rows, cols = grid.get_geometry()
    width, height = fig.get_size_inches()
    hspaces, vspaces = np.zeros((rows, cols + 1)), np.zeros((rows + 1, cols))
    to_figure = fig.transFigure.inverted()
    for ax, spec in zip(axes, specs):
        if not ax.get_visible():
            continue
        extent = axes_extent(ax, renderer, fig.dpi)
        if extent is None:
            return None
        cell = spec.get_position(fig)
        tight = to_figure.transform_bbox(extent)
        r, c = spec.rowspan.start, spec.colspan.start
        hspaces[r, c] += cell.xmin - tight.xmin
        hspaces[r, c + 1] += tight.xmax - cell.xmax
        vspaces[r, c] += tight.ymax - cell.ymax
        vspaces[r + 1, c] += cell.ymin - tight.ymin
    # The arithmetic of matplotlib's _tight_layout._auto_adjust_subplotpars (rect=None).
    import matplotlib as mpl
    from matplotlib.font_manager import FontProperties

    pad = PAD * FontProperties(size=mpl.rcParams["font.size"]).get_size_in_points() / 72
    left = max(hspaces[:, 0].max(), 0) + pad / width
    right = max(hspaces[:, -1].max(), 0) + pad / width
    top = max(vspaces[0, :].max(), 0) + pad / height
    bottom = max(vspaces[-1, :].max(), 0) + pad / height
    if left + right >= 1 or bottom + top >= 1:
        return None  # let tight_layout warn that the decorations do not fit
    # fig.tight_layout() does this twice, its rect (0, 0, 1, 1) feeding the right and top
    # margins back in as 1 - (1 - (1 - margin)): the same margins, but for a rounding error
    # that can move an edge by a pixel. The same round trip gives the same pixels.
    right, top = (1 - (1 - (1 - (1 - margin))) for margin in (right, top))
    params = {"left": left, "right": 1 - right, "bottom": bottom, "top": 1 - top}
    if cols > 1:
        gap = hspaces[:, 1:-1].max() + pad / width
        each = (1 - right - left - gap * (cols - 1)) / cols
        if each < 0:
            return None
        params["wspace"] = gap / each
    if rows > 1:
        gap = vspaces[1:-1, :].max() + pad / height
        each = (1 - top - bottom - gap * (rows - 1)) / rows
        if each < 0:
            return None
        params["hspace"] = gap / each
    return params


def axes_extent(ax, renderer, dpi: float):
    """The box Axes.get_tightbbox(for_layout_only=True) gives for a plain axes, computed with
    the same arithmetic; None for an axes with anything this does not measure."""
    from matplotlib.ticker import NullFormatter, NullLocator
    from matplotlib.transforms import Bbox

    if (ax.get_aspect() != "auto" or ax.get_axes_locator() is not None or ax.texts
            or ax.artists or ax.child_axes or ax.get_title("left") or ax.get_title("right")
            or any(spine.get_position() != ("outward", 0.0) for spine in ax.spines.values())
            or set(ax.spines.keys()) != {"left", "right", "bottom", "top"}):
        return None
    frame = ax.bbox
    for artist in (*ax.lines, *ax.collections, *ax.patches, *ax.images, *ax.tables):
        clip = artist.get_clip_box()
        if (artist.get_visible() and artist.get_in_layout()
                and not (artist.get_clip_on() and artist.get_clip_path() is None
                         and clip is not None and np.allclose(clip.bounds, frame.bounds))):
            return None  # drawn beyond the frame
    # The spines, through their own transforms (a rounding error apart from the frame, which
    # can decide on which side of a pixel an edge falls), with their ticks' outward length.
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    ends = {"bottom": (ax.get_xaxis_transform(), [(xlim[0], 0), (xlim[1], 0)]),
            "top": (ax.get_xaxis_transform(), [(xlim[0], 1), (xlim[1], 1)]),
            "left": (ax.get_yaxis_transform(), [(0, ylim[0]), (0, ylim[1])]),
            "right": (ax.get_yaxis_transform(), [(1, ylim[0]), (1, ylim[1])])}
    spines = {}
    for side, (transform, points) in ends.items():
        points = transform.transform(points)
        spines[side] = Bbox([points.min(axis=0), points.max(axis=0)])
    boxes = [frame]
    for axis, side in ((ax.xaxis, "bottom"), (ax.yaxis, "left")):
        if not (ax.axison and axis.get_visible()):
            continue
        if axis.get_label_position() != side or not (
                isinstance(axis.get_minor_formatter(), NullFormatter)
                or isinstance(axis.get_minor_locator(), NullLocator)):
            return None  # labels on the far side, or labelled minor ticks
        drawn = drawn_ticks(axis)
        if axis.get_major_formatter().get_offset() or any(t.label2.get_visible() for t in drawn):
            return None  # an offset text, or tick labels on the far side
        if any(t.tick2line.get_visible() for t in drawn[:1]):
            return None  # ticks on the far side
        if drawn and drawn[0].tick1line.get_visible():
            spine = spines[side].frozen()
            outward = {"out": 1, "in": 0}.get(drawn[0].get_tickdir(), 0.5)
            outward = outward * drawn[0].tick1line.get_markersize() / 72 * dpi
            if side == "bottom":
                spine.y0 = spine.y0 - outward
            else:
                spine.x0 = spine.x0 - outward
            spines[side] = spine
        labels = [t.label1.get_window_extent(renderer) for t in drawn
                  if t.label1.get_visible() and t.label1.get_in_layout()]
        boxes += labels
        label = axis.label
        if not (label.get_visible() and label.get_text()):
            continue  # an empty text is a point, which matplotlib leaves out
        # Place the axis label as matplotlib will (labelpad beyond the tick labels and the
        # spine) and measure it there; only its depth counts.
        beyond = Bbox.union([*labels, spines[side]])
        x, y = label.get_position()
        if side == "bottom":
            label.set_position((x, beyond.y0 - axis.labelpad * dpi / 72))
            box = label.get_window_extent(renderer)
            boxes.append(Bbox([[frame.x0, box.y0], [frame.x1, box.y1]]))
        else:
            label.set_position((beyond.x0 - axis.labelpad * dpi / 72, y))
            box = label.get_window_extent(renderer)
            boxes.append(Bbox([[box.x0, frame.y0], [box.x1, frame.y1]]))
    if ax.axison and ax.get_frame_on():
        boxes += [spines[side] for side in spines if ax.spines[side].get_visible()]
    if ax.title.get_visible() and ax.title.get_text():
        box = ax.title.get_window_extent(renderer)  # its width does not count, as in matplotlib
        middle = (box.x0 + box.x1) / 2
        boxes.append(Bbox([[middle - 0.5, box.y0], [middle + 0.5, box.y1]]))
    legend = ax.get_legend()
    if legend is not None and legend.get_visible() and legend.get_in_layout():
        if legend.get_bbox_to_anchor() is not ax.bbox:
            return None
        boxes.append(legend.get_window_extent(renderer))
    return Bbox.union(boxes)


def drawn_ticks(axis) -> list:
    """The major ticks matplotlib will draw (inside the view interval), with labels updated."""
    axis.get_majorticklabels()  # updates the ticks' positions and labels
    transform = axis.get_transform()
    low, high = sorted(transform.transform(np.asarray(axis.get_view_interval(), float)))
    slack = 1e-10 * (high - low)
    ticks = axis.get_major_ticks()
    locs = transform.transform(np.asarray([t.get_loc() for t in ticks], float))
    return [t for t, loc in zip(ticks, locs) if low - slack <= loc <= high + slack]


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
