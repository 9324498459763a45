"""The static path of bertgpt.widgets.explore (one figure, drawn at the defaults), and glue in the book's run
and outside it."""

import sys
import types

import IPython.display
import matplotlib.pyplot as plt
import pytest

from bertgpt import widgets


def test_default_value():
    assert widgets.default_value(["gpt", "bert"]) == "gpt"
    assert widgets.default_value((0.5, 2.0, 0.1)) == 0.5
    assert widgets.default_value((0.5, 2.0, 0.1, 1.0)) == 1.0
    assert widgets.default_value(7) == 7


def test_static_explore_draws_one_figure_at_defaults(monkeypatch):
    monkeypatch.setenv("BERTGPT_STATIC", "1")
    plt.close("all")
    calls = []

    def plot(family, temperature, n):
        calls.append(dict(family=family, temperature=temperature, n=n))
        fig, ax = plt.subplots()
        ax.plot(range(n), [temperature] * n)

    result = widgets.explore(plot, family=["gpt", "bert"], temperature=(0.1, 2.0, 0.1, 1.0), n=5)

    assert result is None
    assert calls == [dict(family="gpt", temperature=1.0, n=5)]
    assert len(plt.get_fignums()) == 1
    plt.close("all")


def test_live_explore_starts_at_the_same_defaults(monkeypatch):
    monkeypatch.delenv("BERTGPT_STATIC", raising=False)
    monkeypatch.setattr(plt, "show", lambda: None)
    plt.close("all")
    calls = []

    def plot(family, temperature, n):
        calls.append(dict(family=family, temperature=temperature, n=n))

    widget = widgets.explore(plot, family=["gpt", "bert"], temperature=(0.1, 2.0, 0.1, 1.0), n=5)

    assert widget is not None
    assert widget.kwargs == dict(family="gpt", temperature=1.0, n=5)
    assert calls == [dict(family="gpt", temperature=1.0, n=5)]
    plt.close("all")


def test_glue_outside_the_books_run_prints_hidden_values_with_their_names(monkeypatch, capsys):
    monkeypatch.delenv("BERTGPT_BOOK", raising=False)  # a learner's Jupyter, MyST-NB installed or not
    widgets.glue("era_gap", 4.199999809265137, display=False)
    widgets.glue("tokens", 1740800.0, display=False)
    widgets.glue("steps", 850, display=False)
    widgets.glue("catch", "at none of its snapshots", display=False)
    widgets.glue("shown", 0.75)
    assert capsys.readouterr().out.splitlines() == [
        "era_gap = 4.2", "tokens = 1,740,800", "steps = 850", "catch = at none of its snapshots", "0.75"]


def test_glue_outside_the_books_run_shows_a_hidden_figure(monkeypatch):
    """The book places a glued figure under its caption; a learner's kernel must show it where it is drawn,
    MyST-NB installed (the README's local route) or not (Colab)."""
    monkeypatch.delenv("BERTGPT_BOOK", raising=False)
    calls = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: calls.append(name)
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda value, **kw: shown.append(value))
    fig, _ = plt.subplots()
    widgets.glue("fig-x", fig, display=False)
    plt.close(fig)
    assert shown == [fig] and calls == []


def test_glue_in_the_books_run_hands_values_to_myst_nb_unchanged(monkeypatch, capsys):
    monkeypatch.setenv("BERTGPT_BOOK", "1")  # as scripts/execute_notebooks.py runs a chapter
    calls = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: calls.append((name, value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    fig, _ = plt.subplots()
    widgets.glue("fig-x", fig, display=False)
    widgets.glue("era_gap", 4.2, display=False)
    plt.close(fig)
    assert calls == [("fig-x", fig, False), ("era_gap", 4.2, False)]
    assert capsys.readouterr().out == ""


def test_a_markdown_table_has_a_rule_that_aligns_numbers_right():
    out = widgets.markdown_table(["", "accuracy"], [["gpt-mini", "61.8"], ["bert-mini", 62.8]], "lr")
    assert out.data == "|  | accuracy |\n| --- | ---: |\n| gpt-mini | 61.8 |\n| bert-mini | 62.8 |"
    with pytest.raises(ValueError):
        widgets.markdown_table(["a", "b"], [["only one"]])
