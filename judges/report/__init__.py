"""Published renderings of a wave's boards: the static HTML report (`render_html`)."""

from judges.report.html import HEADER_COLOUR, render_html

__all__ = ["HEADER_COLOUR", "render_html"]
