"""What a chapter notebook needs beyond the model: interactive figures with a static fallback, glue,
and tables of results (:func:`markdown_table`).

A chapter calls :func:`explore` with a plotting function and its controls. In Jupyter the reader gets
sliders and drop-downs; in the rendered book, under the execution script (which sets the environment
variables ``BERTGPT_STATIC`` and ``BERTGPT_BOOK``) or wherever ipywidgets is missing, the same
function is drawn once at the controls' default values, so the page shows a picture of exactly what
the widget starts from.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt


def default_value(control: Any) -> Any:
    """The value a control starts at.

    Args:
        control: A list of choices (starts at the first), a tuple ``(min, max)``, ``(min, max, step)``
            or ``(min, max, step, start)`` for a slider (starts at ``start``, else at ``min``), or any
            other value, which is passed to the plot unchanged.

    Returns:
        The starting value.
    """
    if isinstance(control, list):
        return control[0]
    if isinstance(control, tuple):
        return control[3] if len(control) == 4 else control[0]
    return control


def is_static() -> bool:
    """True when figures must be drawn once, without widgets."""
    if os.environ.get("BERTGPT_STATIC"):
        return True
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return True
    return False


def _widget(name: str, control: Any):
    """The ipywidgets control for one argument, starting at :func:`default_value`."""
    import ipywidgets as w

    start = default_value(control)
    if isinstance(control, list):
        return w.Dropdown(options=control, value=start, description=name)
    if isinstance(control, tuple):
        lo, hi = control[:2]
        step = control[2] if len(control) > 2 else None
        numbers = (lo, hi, start) + ((step,) if step is not None else ())
        if all(isinstance(v, int) for v in numbers):
            return w.IntSlider(min=lo, max=hi, step=step or 1, value=start, description=name)
        return w.FloatSlider(min=lo, max=hi, step=step or (hi - lo) / 100, value=start, description=name)
    return w.fixed(control)


def explore(plot: Callable[..., Any], **controls: Any):
    """Show ``plot`` with a control per keyword argument, or once at the defaults.

    Args:
        plot: A function that draws one matplotlib figure from keyword arguments.
        **controls: For each argument of ``plot``, a list of choices (a drop-down), a tuple
            ``(min, max[, step[, start]])`` (a slider) or a fixed value.

    Returns:
        The ``ipywidgets.interactive`` widget, or ``None`` when the figure was drawn once.

    Example:
        >>> def curve(temperature, n):
        ...     xs = range(n)
        ...     plt.plot(xs, [x / temperature for x in xs])
        >>> explore(curve, temperature=(0.5, 2.0, 0.1, 1.0), n=[10, 100])  # doctest: +SKIP
    """
    if is_static():
        plot(**{name: default_value(c) for name, c in controls.items()})
        plt.show()
        return None

    from IPython.display import display
    from ipywidgets import interactive

    def draw(**values):
        plot(**values)
        plt.show()

    widget = interactive(draw, **{name: _widget(name, c) for name, c in controls.items()})
    display(widget)
    return widget


def glue(name: str, value: Any, display: bool = True) -> None:
    """Hand ``value`` to the book's prose as ``{glue:text}`name``` in the book's run; show it anywhere else.

    The rendered book reads glued values from the notebooks as the execution script ran them (it sets
    the environment variable ``BERTGPT_BOOK``) and places each one in the prose, a figure under its
    caption, so a chapter glues its results hidden (``display=False``). Anywhere else, in a learner's
    Jupyter or Colab, nothing places them, so every value shows where it is computed: a number or a
    string is printed with its name (``era_gap = 4.2``) and anything else (a figure, say) is displayed
    as the cell's output, hidden or not.
    """
    if os.environ.get("BERTGPT_BOOK"):
        from myst_nb import glue as myst_glue

        myst_glue(name, value, display=display)
        return
    if display or not isinstance(value, (str, numbers.Number)):
        from IPython.display import display as show

        show(value)
    else:
        print(f"{name} = {_plain(value)}")


def _plain(value: str | numbers.Number) -> str:
    """A glued value as a learner reads it: a float to six significant digits (more than any format in
    the prose keeps), with thousands separators from a million up rather than an exponent."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def markdown_table(header: list, rows: list[list], align: str | None = None):
    """A table of results as the cell's output: Markdown that the book, Jupyter and Colab all render.

    Args:
        header: The column titles.
        rows: One list of cells per row; each cell is written with ``str``.
        align: One letter per column, ``"l"`` (left) or ``"r"`` (right, for numbers); default all left.

    Returns:
        An ``IPython.display.Markdown`` object, to ``display`` or leave as the cell's value. The book
        renders it as MyST (``nb_render_markdown_format`` in ``_config.yml``): read as CommonMark,
        MyST-NB's default, which has no tables, the page would show the pipes as text.
    """
    from IPython.display import Markdown

    align = align or "l" * len(header)
    if len(align) != len(header) or any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row and the alignment need {len(header)} columns, one per title")
    rule = ["---:" if a == "r" else "---" for a in align]
    return Markdown("\n".join("| " + " | ".join(map(str, r)) + " |" for r in [header, rule, *rows]))
