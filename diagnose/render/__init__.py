"""Report rendering: results.json → HTML, PDF, JUnit XML, Prometheus textfile."""

from diagnose.render.render import FORMATS, render, render_from_dict

__all__ = ["FORMATS", "render", "render_from_dict"]
