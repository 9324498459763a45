"""Plots the chapters share: attention maps (and masks, which are 0/1 attention maps) and loss curves.

Each function draws on a matplotlib ``Axes`` it is given and returns it, so a chapter arranges the
panels and this module only fills them::

    fig, axes = plt.subplots(1, 2)
    attention_map(axes[0], weights[0, head], tokens, title=f"layer {layer}, head {head}")
    loss_curves(axes[1], {"causal": history_a, "bidirectional": history_b})
    token_strip(axes[2], ["[START]", "the", "union", "[EXTRACT]"], title="one input")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.patches import Rectangle


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


def loss_curves(ax, histories: Mapping[str, object], key: str = "loss", title: str | None = None):
    """Draw the training-loss curve of each :class:`~bertgpt.trainer.History`, labelled by its name.

    Args:
        ax: The matplotlib ``Axes`` to draw on.
        histories: ``{label: History}``; each history's ``train`` records give steps and values.
        key: Which logged value to draw ("loss" by default).
        title: The panel's title.

    Returns:
        The ``Axes``.
    """
    for label, history in histories.items():
        records = history.train
        ax.plot([r["step"] for r in records], [r[key] for r in records], label=label)
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
