"""The static path of bertgpt.widgets.explore: one figure, drawn at the defaults."""

import matplotlib.pyplot as plt

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


def test_glue_without_myst_nb_shows_displayed_values_and_drops_hidden_ones(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "myst_nb", None)  # as on Colab: importing fails
    widgets.glue("hidden", 0.25, display=False)
    widgets.glue("shown", 0.75)
    assert capsys.readouterr().out.strip() == "0.75"
