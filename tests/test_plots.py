"""bertgpt.plots: panels are drawn on the Axes they are given, with the labels asked for."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import bertgpt  # noqa: E402
from bertgpt.plots import COLOURS, architecture, attention_map, loss_curves  # noqa: E402
from bertgpt.trainer import History  # noqa: E402


def test_attention_map_draws_the_matrix_with_token_labels():
    fig, ax = plt.subplots()
    mask = torch.ones(3, 3).tril()
    assert attention_map(ax, mask, ["a", "b", "c"], title="causal") is ax
    image = ax.get_images()[0]
    assert (image.get_array() == mask.numpy()).all()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_title() == "causal"
    plt.close(fig)


def test_attention_map_without_tokens_has_no_ticks():
    fig, ax = plt.subplots()
    attention_map(ax, [[0.5, 0.5], [0.0, 1.0]])
    assert list(ax.get_xticks()) == []
    plt.close(fig)


def test_loss_curves_one_line_per_history():
    histories = {}
    for name, offset in (("a", 0.0), ("b", 1.0)):
        h = History()
        h.train = [dict(step=s, loss=5.0 - s / 100 + offset, lr=1e-3) for s in (10, 20, 30)]
        histories[name] = h
    fig, ax = plt.subplots()
    loss_curves(ax, histories)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["a", "b"]
    assert list(lines[1].get_xdata()) == [10, 20, 30]
    plt.close(fig)


def test_token_strip_draws_one_box_per_token_and_shades_the_special_ones():
    import matplotlib.pyplot as plt

    from bertgpt.plots import token_strip
    fig, ax = plt.subplots()
    token_strip(ax, ["[START]", "the", "union", "[EXTRACT]"], title="one input")
    shaded = [p.get_facecolor()[:3] != (1.0, 1.0, 1.0) for p in ax.patches]
    assert shaded == [True, False, False, True]
    assert [t.get_text() for t in ax.texts] == ["[START]", "the", "union", "[EXTRACT]"]
    plt.close(fig)


def _drawing(family, **changes):
    model = bertgpt.build(bertgpt.model_config("tiny", family, **changes))
    fig, ax = plt.subplots()
    architecture(ax, model, ["[CLS]", "a", "[MASK]"], ["IsNext", None, "b"], title=family)
    texts = [t.get_text() for t in ax.texts]
    plt.close(fig)
    return ax, texts


def test_architecture_is_labelled_from_the_model_config():
    ax, texts = _drawing("bert", positions="rotary")
    assert "self-attention, 2 heads, rotary positions" in texts
    assert "token + segment embeddings" in texts  # rotary: no position embeddings
    assert "× 2 blocks, width 32" in texts and "mask: none" in texts
    assert "b" in texts and "IsNext" in texts and ax.get_title() == "bert"
    _, texts = _drawing("gpt")
    assert "token + position embeddings" in texts and "mask: causal" in texts


def test_architecture_draws_the_mask_the_model_uses_in_its_family_colour():
    def mask_cells(family):
        ax, _ = _drawing(family)
        return [p.get_facecolor() for p in ax.patches if p.get_width() < 0.3]  # the mask's cells

    colour = matplotlib.colors.to_rgba
    gpt, bert = mask_cells("gpt"), mask_cells("bert")
    assert len(gpt) == len(bert) == 25
    assert sum(c == colour(COLOURS["gpt"]) for c in gpt) == 15  # the lower triangle, diagonal included
    assert all(c == colour(COLOURS["bert"]) for c in bert)


def test_family_cmap_runs_from_white_to_the_family_colour():
    from bertgpt.plots import family_cmap

    for family in ("gpt", "bert"):
        cmap = family_cmap(family)
        assert cmap(0.0)[:3] == (1.0, 1.0, 1.0)
        assert cmap(1.0) == matplotlib.colors.to_rgba(COLOURS[family])


def test_weight_labels_writes_each_nonzero_entry_in_its_cell():
    from bertgpt.plots import weight_labels

    fig, ax = plt.subplots()
    weights = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    attention_map(ax, weights)
    weight_labels(ax, weights, fmt=lambda v: f"{v:g}")
    placed = {(t.get_position(), t.get_text()) for t in ax.texts}
    assert placed == {((0, 0), "1"), ((0, 1), "0.5"), ((1, 1), "0.5")}
    assert [t.get_color() for t in ax.texts if t.get_text() == "1"] == ["white"]  # on the dark cell
    plt.close(fig)


def test_block_diagram_puts_the_layernorms_where_the_norm_says():
    from bertgpt.plots import block_diagram

    def boxes_bottom_to_top(norm):
        fig, ax = plt.subplots()
        block_diagram(ax, norm, title=norm)
        names = {"LayerNorm", "self-attention", "feed-forward"}
        texts = sorted((t.get_position()[1], t.get_text(), t.get_position()[0]) for t in ax.texts
                       if t.get_text() in names)
        plt.close(fig)
        return [(text, "stream" if x == 0 else "branch") for _, text, x in texts]

    assert boxes_bottom_to_top("pre") == [("LayerNorm", "branch"), ("self-attention", "branch"),
                                          ("LayerNorm", "branch"), ("feed-forward", "branch")]
    assert boxes_bottom_to_top("post") == [("self-attention", "branch"), ("LayerNorm", "stream"),
                                           ("feed-forward", "branch"), ("LayerNorm", "stream")]
    import pytest

    with pytest.raises(ValueError, match="norm"):
        block_diagram(plt.subplots()[1], "middle")
