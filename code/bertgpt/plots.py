"""Plots the chapters share: attention maps (and masks, which are 0/1 attention maps) and loss curves.

Each function draws on a matplotlib ``Axes`` it is given and returns it, so a chapter arranges the
panels and this module only fills them::

    fig, axes = plt.subplots(1, 2)
    attention_map(axes[0], weights[0, head], tokens, title=f"layer {layer}, head {head}")
    loss_curves(axes[1], {"causal": history_a, "bidirectional": history_b})
    token_strip(axes[2], ["[START]", "the", "union", "[EXTRACT]"], title="one input")
    architecture(axes[3], gpt.model, ["[SEP]", "the", "union"], ["the", "union", "is"])
    block_diagram(axes[4], norm="pre")     # one block: the residual stream and its two branches

Every figure gives each family its colour (:data:`COLOURS`): BERT blue, GPT orange.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

#: One colour per model family in every figure of the book. BERT's is blue, GPT's (and every
#: left-to-right model's) orange, the LSTM's green and an untrained model's grey.
COLOURS = {"bert": "C0", "gpt": "C1", "lstm": "C2", "untrained": "0.5"}


def attention_map(ax, weights, tokens: Sequence[str] | None = None, title: str | None = None,
                  cmap: str = "Blues", vmax: float | None = 1.0):
    """Draw a (T, S) matrix of attention weights: row i is what query position i reads.

    Args:
        ax: The matplotlib ``Axes`` to draw on.
        weights: A (T, S) tensor, array or nested list; a mask (True/1 where attention is allowed) works too.
        tokens: Labels for the positions (keys on the x-axis, queries on the y-axis), or None.
        title: The panel's title.
        cmap: A matplotlib colour map.
        vmax: The weight drawn darkest (1.0 by default, so maps are comparable); None scales to the data.

    Returns:
        The ``Axes``.
    """
    w = weights.detach().float().cpu().numpy() if hasattr(weights, "detach") else np.asarray(weights, float)
    ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax)
    T, S = w.shape
    if tokens is not None:
        ax.set_xticks(range(S), list(tokens)[-S:], rotation=90, fontsize=8)
        ax.set_yticks(range(T), list(tokens)[-T:], fontsize=8)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_xlabel("key position (is read)")
    ax.set_ylabel("query position (reads)")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def loss_curves(ax, histories: Mapping[str, object], key: str = "loss", title: str | None = None,
                colours: Mapping[str, str] | None = None):
    """Draw the training-loss curve of each :class:`~bertgpt.trainer.History`, labelled by its name.

    Args:
        ax: The matplotlib ``Axes`` to draw on.
        histories: ``{label: History}``; each history's ``train`` records give steps and values.
        key: Which logged value to draw ("loss" by default).
        title: The panel's title.
        colours: ``{label: colour}`` for some or all of the histories (:data:`COLOURS` has the
            families'); the others take matplotlib's next colours.

    Returns:
        The ``Axes``.
    """
    for label, history in histories.items():
        records = history.train
        style = {"color": colours[label]} if colours and label in colours else {}
        ax.plot([r["step"] for r in records], [r[key] for r in records], label=label, **style)
    ax.set_xlabel("update")
    ax.set_ylabel(f"training {key} (nats per token)" if key == "loss" else key)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend()
    return ax



def token_strip(ax, tokens: Sequence[str], title: str | None = None, special=lambda t: t.startswith("[")):
    """One model input drawn as a row of boxes, one per token; special tokens (``[START]``, ...) shaded."""
    for i, token in enumerate(tokens):
        shaded = special(token)
        ax.add_patch(Rectangle((i, 0), 0.94, 1, facecolor="C1" if shaded else "white", edgecolor="black",
                               alpha=0.35 if shaded else 1.0))
        ax.text(i + 0.47, 0.5, token, ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.1, len(tokens))
    ax.set_ylim(0, 1)
    ax.axis("off")
    if title:
        ax.set_title(title, loc="left", fontsize=10)


def _attention_mask(ax, x: float, causal: bool, colour: str, k: int = 5) -> int:
    """The attention mask as a k x k grid from ``x`` rightwards (row i: what query i reads); returns k."""
    for i in range(k):
        for j in range(k):
            ax.add_patch(Rectangle((x + 0.3 * j, 4.7 - 0.3 * i), 0.28, 0.28, linewidth=0,
                                   facecolor=colour if j <= i or not causal else "0.92"))
    ax.text(x + 0.15 * k, 5.1, "mask: " + ("causal" if causal else "none"), ha="center", va="bottom",
            fontsize=7)
    ax.text(x + 0.15 * k, 3.4, "query i (row) reads\nthe coloured keys", ha="center", va="top", fontsize=6.5)
    return k


def architecture(ax, model, tokens: Sequence[str], targets: Sequence[str | None], title: str | None = None):
    """Draw ``model`` as the stack the chapters build, from its own config: one input below (a token
    per column), the embeddings, the blocks with their attention mask beside them, the output layer,
    and above each column what pretraining asks of it (None: no loss there).

    Args:
        ax: The matplotlib ``Axes`` to draw on.
        model: A built GPT or BERT: its ``config`` labels the drawing, and its mask's colour is the
            causal (orange) or two-sided (blue) one of :data:`COLOURS`.
        tokens: The input, one string per position.
        targets: What pretraining predicts at each position, or None where it predicts nothing.
        title: The panel's title.

    Returns:
        The ``Axes``.
    """
    cfg, n = model.config, len(tokens)
    colour = COLOURS["gpt" if cfg.causal else "bert"]

    def box(y, height, text, face="white"):  # one layer of the stack, across every position
        ax.add_patch(FancyBboxPatch((-0.05, y), n - 0.1, height, boxstyle="round,pad=0.02",
                                    facecolor=face, edgecolor="black", linewidth=0.8))
        ax.text(n / 2 - 0.1, y + height / 2, text, ha="center", va="center", fontsize=8)

    for i in range(n):  # each position's path up the stack, and to its target where it has one
        for lo, hi in ((0.8, 1.2), (2.0, 2.4), (5.1, 5.5), *([(6.3, 6.9)] if targets[i] is not None else [])):
            ax.plot([i + 0.46] * 2, [lo, hi], color="0.5", linewidth=0.6)
    for y, words in ((0.0, tokens), (6.9, targets)):
        for i, word in enumerate(words):
            if word is not None:  # special tokens and targets shaded in the family's colour
                shaded = word.startswith("[") or y > 0
                ax.add_patch(Rectangle((i, y), 0.92, 0.8, facecolor=colour if shaded else "white",
                                       alpha=0.3 if shaded else 1.0, edgecolor="black", linewidth=0.6))
                ax.text(i + 0.46, y + 0.4, word, ha="center", va="center", fontsize=7)
    parts = ["token", *(["position"] if cfg.positions == "learned" else []),
             *(["segment"] if cfg.segments else [])]
    box(1.2, 0.8, " + ".join(parts) + " embeddings")
    norm = "LayerNorm " + {"pre": "before each part (pre-LN)", "post": "after each add (post-LN)"}[cfg.norm]
    attention = f"self-attention, {cfg.n_head} heads" + (", rotary positions" * (cfg.positions == "rotary"))
    box(2.4, 2.7, "", face="0.95")
    for y, text in ((4.45, attention), (3.6, f"feed-forward {cfg.d_model} → {cfg.d_ff} → {cfg.d_model}"),
                    (2.95, norm)):
        ax.text(n / 2 - 0.1, y, text, ha="center", va="center", fontsize=8)
    ax.text(n - 0.1, 2.5, f"× {cfg.n_layer} blocks, width {cfg.d_model}", ha="right", va="bottom", fontsize=7,
            style="italic")
    box(5.5, 0.8, "output layer: the token embeddings, tied" + ("" if cfg.causal else "; NSP head on [CLS]"))
    k = _attention_mask(ax, n + 0.4, cfg.causal, colour)
    ax.set_xlim(-0.2, n + 0.6 + 0.3 * k)
    ax.set_ylim(-0.2, 7.9)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def family_cmap(family: str):
    """A colour map from white to the colour of ``family`` in :data:`COLOURS`, so that a heat map of a
    GPT's weights is orange and a BERT's blue: ``attention_map(ax, w, cmap=family_cmap("gpt"))``."""
    from matplotlib.colors import LinearSegmentedColormap, to_rgb

    return LinearSegmentedColormap.from_list(f"{family}-weights", ["white", to_rgb(COLOURS[family])])


def weight_labels(ax, weights, fmt="{:.2f}", skip_zero: bool = True, fontsize: float = 7):
    """Write each entry of a (T, S) matrix in its cell of the heat map ``ax`` already shows, in white
    on the darker half of the colour scale.

    Args:
        ax: An ``Axes`` holding the map (:func:`attention_map`).
        weights: The (T, S) matrix drawn there (tensor, array or nested list).
        fmt: A format string, or a function from an entry to its label.
        skip_zero: Leave cells holding 0 blank.
        fontsize: The labels' size.

    Returns:
        The ``Axes``.
    """
    w = weights.detach().float().cpu().numpy() if hasattr(weights, "detach") else np.asarray(weights, float)
    images = ax.get_images()
    top = images[-1].norm.vmax if images and images[-1].norm.vmax else float(np.nanmax(np.abs(w)))
    for (i, j), value in np.ndenumerate(w):
        if skip_zero and value == 0:
            continue
        value = float(value)
        label = fmt(value) if callable(fmt) else fmt.format(value)
        ax.text(j, i, label, ha="center", va="center", fontsize=fontsize,
                color="white" if np.isfinite(value) and value > 0.6 * top else "black")
    return ax


def _block_box(ax, x, y, text):
    """One part of :func:`block_diagram`, centred at (x, y); LayerNorms shaded."""
    shade = "0.88" if text == "LayerNorm" else "white"
    ax.add_patch(FancyBboxPatch((x - 0.75, y - 0.22), 1.5, 0.44, boxstyle="round,pad=0.03",
                                facecolor=shade, edgecolor="black", linewidth=0.8, zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=8, zorder=4)


def _arrow(ax, x0, y0, x1, y1):
    ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="->", color="0.3", lw=1), zorder=2)


def _branch(ax, y: float, boxes: Sequence[str]) -> float:
    """A residual branch of :func:`block_diagram` leaving the stream at ``y``: its ``boxes`` on the
    right, bottom to top, then the addition back into the stream; returns the height above it."""
    top = y + 0.6 * len(boxes) + 0.5  # where the branch adds back
    ax.plot([0, 1.6, 1.6], [y + 0.15, y + 0.15, y + 0.3], color="0.3", lw=1)
    for i, text in enumerate(boxes):
        _block_box(ax, 1.6, y + 0.6 + 0.6 * i, text)
        if i:  # from the box below into this one
            ax.plot([1.6, 1.6], [y + 0.6 * i + 0.2, y + 0.6 * i + 0.4], color="0.3", lw=1)
    ax.plot([1.6, 1.6, 0.13], [y + 0.6 * len(boxes) + 0.22, top, top], color="0.3", lw=1)
    _arrow(ax, 0, y, 0, top - 0.13)
    ax.add_patch(Circle((0, top), 0.13, facecolor="white", edgecolor="black", zorder=3))
    ax.text(0, top, "+", ha="center", va="center", fontsize=9, zorder=4)
    ax.text(-0.12, (y + top) / 2, "residual", rotation=90, ha="right", va="center", fontsize=7, color="0.3")
    return top + 0.13


def block_diagram(ax, norm: str = "pre", title: str | None = None):
    """One Transformer block drawn as what it does to the residual stream, bottom to top.

    The stream runs up the left; each sublayer (self-attention, then the feed-forward network) sits
    on a branch that reads the stream and adds its output back to it (the residual connection). With
    ``norm="pre"`` (GPT-2 onward, the course's minis) a LayerNorm opens each branch and the stream
    itself is never normalised; with ``norm="post"`` (the original Transformer, GPT-1, BERT) a
    LayerNorm sits on the stream after each addition.

    Args:
        ax: The matplotlib ``Axes`` to draw on.
        norm: "pre" or "post", as ``ModelConfig.norm``.
        title: The panel's title.

    Returns:
        The ``Axes``.
    """
    if norm not in ("pre", "post"):
        raise ValueError(f"norm must be 'pre' or 'post', not {norm!r}")
    y = 0.0
    ax.text(0, y - 0.15, "x: one vector per position", ha="center", va="top", fontsize=8)
    for sublayer in ("self-attention", "feed-forward"):
        if norm == "pre":
            y = _branch(ax, y, ["LayerNorm", sublayer])
        else:  # the stream itself passes through the LayerNorm after the addition
            y = _branch(ax, y, [sublayer])
            _block_box(ax, 0, y + 0.6, "LayerNorm")
            _arrow(ax, 0, y, 0, y + 0.38)
            y += 0.82
    _arrow(ax, 0, y, 0, y + 0.35)
    ax.text(0, y + 0.4, "to the next block", ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-0.9, 2.5)
    ax.set_ylim(-0.6, y + 0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
