"""What a drawn figure shows, read back from its artists (:func:`figure_data`): written beside each figure
as ``{name}.json``, for checks and reuse."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer

IMAGE_DIGITS = 6  # significant digits of an image's values in figure_data (a 64 × 64 image is 4,096 numbers)


def _numbers(values) -> list:
    """Floats for JSON (NaN and infinities as None)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float).ravel()]


def _bar_series(container: BarContainer) -> dict:
    """A labelled bar series: bar centres ``x`` and values ``y`` (for horizontal bars, the centres on
    the vertical axis and the bar lengths)."""
    bars = list(container)
    horizontal = getattr(container, "orientation", "vertical") == "horizontal"
    centres = [b.get_y() + b.get_height() / 2 if horizontal else b.get_x() + b.get_width() / 2 for b in bars]
    values = [b.get_width() if horizontal else b.get_height() for b in bars]
    return {"kind": "bar", "label": container.get_label(), "orientation": "horizontal" if horizontal else "vertical",
            "colour": mcolors.to_hex(bars[0].get_facecolor()) if bars else None,
            "x": _numbers(centres), "y": _numbers(values)}


def _legend_texts(legend) -> list[str]:
    return [text.get_text() for text in legend.get_texts()] if legend is not None else []


def figure_data(fig) -> dict:
    """What ``fig`` draws, from its artists: per panel its text and its labelled series' values.

    Lines (``kind`` "line": x, y), bar series ("bar": bar centres x, values y), scatter points
    ("points": x, y) and images ("image": rows of values, None where blank); unlabelled lines (error
    bars, helpers) are left out. ``legend``: the entries of the figure's own legends; a panel's
    ``legend``, those of its legend.
    """
    panels = []
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        series = []
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                x, y = line.get_data()
                series.append({"kind": "line", "label": line.get_label(), "colour": mcolors.to_hex(line.get_color()),
                               "x": _numbers(x), "y": _numbers(y)})
        series += [_bar_series(container) for container in ax.containers if isinstance(container, BarContainer)]
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                offsets = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
                series.append({"kind": "points", "x": _numbers(offsets[:, 0]), "y": _numbers(offsets[:, 1])})
        for image in ax.get_images():
            values = np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)
            rounded = [[None if v is None else float(f"{v:.{IMAGE_DIGITS}g}") for v in _numbers(row)] for row in values]
            series.append({"kind": "image", "values": rounded})
        panels.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                       "ylim": _numbers(ax.get_ylim()),
                       "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
                       "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
                       "notes": [t.get_text() for t in ax.texts], "legend": _legend_texts(ax.get_legend()),
                       "series": series})
    return {"suptitle": fig._suptitle.get_text() if fig._suptitle else "", "panels": panels,
            "legend": [text for legend in fig.legends for text in _legend_texts(legend)]}
