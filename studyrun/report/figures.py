"""Figures for report.md, drawn with matplotlib's non-interactive backend into figures/."""

from __future__ import annotations

from pathlib import Path


class Figures:
    """Saves matplotlib figures under one folder and returns their Markdown links."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def new(self, nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (6.0, 4.0)):
        """A new (figure, axes) pair; matplotlib is imported here so validation stays fast."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt.subplots(nrows, ncols, figsize=size, squeeze=nrows * ncols == 1)

    def save(self, fig, name: str, caption: str = "") -> str:
        """Write figures/<name>.png, close the figure and return a Markdown image line."""
        import matplotlib.pyplot as plt

        self.folder.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(self.folder / f"{name}.png", dpi=110)
        plt.close(fig)
        return f"![{caption or name}](figures/{name}.png)"
