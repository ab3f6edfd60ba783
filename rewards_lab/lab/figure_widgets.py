"""Figures inside widgets, crisp: a widget's figure is drawn at the width it is shown at.

An `Image` widget in a `VBox` stretches to the box's width (flex `align-items: stretch`), so a figure drawn at
about 630 px appeared blown up to the notebook's width (1400 px on a wide screen), blurred. Here a widget asks
for figures `PLOT_WIDTH_PX` CSS pixels wide (`figure_size`), renders them at `PIXEL_RATIO` device pixels per
CSS pixel (sharp on high-density screens too) at the figure's own size (no tight bounding box, so the PNG's size
is known), and fixes the image's display width to the figure's: it never stretches, and shrinks (`max_width`)
only in a narrower window.
"""

from __future__ import annotations

import ipywidgets as w
from matplotlib.figure import Figure

from rewards_lab.lab import plots

CSS_DPI = 96  # CSS pixels per inch: a figure of 10 inches is 960 CSS pixels wide
PIXEL_RATIO = 2  # device pixels per CSS pixel in the PNG
PLOT_WIDTH_PX = 960  # the widgets' figures: a notebook's output column on a laptop screen


def figure_size(aspect: float, width_px: int = PLOT_WIDTH_PX) -> tuple[float, float]:
    """A figure size (inches) `width_px` CSS pixels wide, `aspect` (height over width) high."""
    return width_px / CSS_DPI, width_px * aspect / CSS_DPI


def show_figure(image: w.Image, figure: Figure) -> None:
    """Put a figure into an image widget at its own width (in CSS pixels), rendered for sharp display."""
    data = plots.png(figure, dpi=CSS_DPI * PIXEL_RATIO, tight=False)
    image.value = data
    width = round(figure.get_figwidth() * CSS_DPI)
    image.layout.width = f"{width}px"
    image.layout.max_width = "100%"
    image.layout.height = "auto"
    image.layout.display = None
