"""The registry of named models: which names exist, the recipes of the course models, and what is said
and shown of each. One place for what the hub trains and loads (:mod:`bertgpt.hub`), what the ship
script writes into a card (``scripts/ship_course_model.py``), what the Try page's widget runs and tells
its JavaScript through its manifest (``book/_ext/try_models.py``), and what the Colab edition links;
and :func:`pretrained_configs`, which turns a name and its changes into the configs of its run::

    COURSE["bert-mini"]      # its recipe: changes to the mini's model and training configs
    SUMMARY["gpt-mini"]      # one line for its card
    WIDGET_MODES["attention"]  # the models one panel of the Try page runs, in the order it shows them
    pretrained_configs("bert-mini", course=True)  # (model config, pretraining config) of its recipe
"""

from __future__ import annotations

import dataclasses

from .config import FAMILIES, model_config, pretraining_model, replace_fields, train_config

DEFAULT_TOKENIZER = {"gpt": "bpe", "bert": "wordpiece"}  # the kind of tokenizer each family reads

NAMES = (*(f"{family}-{size}" for family in FAMILIES for size in ("tiny", "mini", "small")), "lstm-mini",
         "bert-mini-mlm", "bert-mini-ltr", "electra-mini")
# The course models: the minis' shapes, pretrained once at a budget where both objectives have learned
# what the chapters show, and shipped inside the package (SHIPPED / name: a checkpoint directory and
# its card.json). Measured on short runs first (bench/README.md, "The course models"): bert-mini keeps
# learned positions on a plateau for thousands of updates, so it turns its queries and keys by their
# position instead (rotary, Su et al. 2021) and trains every update at full length: a departure from
# both papers, named in its card. Every snapshot a chapter reads ships in `SHIPPED / name / "snapshots"`
# (gpt-mini's seven, bert-mini's first five); asked for, bert-mini's after 1,600 updates is retrained as
# the recipe's first updates (`pretrained(name, step=...)`).
_BERT_COURSE = dict(steps=16000, eval_every=1000, short_fraction=0.0)
COURSE = {
    "gpt-mini": dict(model={}, train=dict(steps=12000, eval_every=1000,
                                          snapshots=(10, 25, 50, 100, 200, 400, 800))),
    "bert-mini": dict(model=dict(positions="rotary"),
                      train=dict(_BERT_COURSE, snapshots=(50, 100, 200, 400, 800, 1600))),
    # BERT's Table 5 in miniature: bert-mini's recipe with one change each, the same shape, tokens
    # and updates. "No NSP" keeps the masked LM alone; "LTR & No NSP" trains the same Transformer
    # left to right (causal attention, GPT's loss on every token) on bert-mini's own WordPiece tokens.
    "bert-mini-mlm": dict(base="bert-mini", model=dict(positions="rotary"),
                          train=dict(_BERT_COURSE, nsp=False, snapshots=())),
    "bert-mini-ltr": dict(base="bert-mini", model=dict(positions="rotary", causal=True, segments=0),
                          train=dict(_BERT_COURSE, nsp=False, snapshots=()), tokenizer="wordpiece"),
}
# ELECTRA in miniature (chapter 9; Clark et al., 2020): bert-mini-mlm's shape, tokens and recipe for the
# discriminator, trained by replaced-token detection (``objective``) with a generator ``width`` times as
# wide, 15% of the tokens replaced (the paper's rate, where bert-mini-mlm masks 40%), and 11,723
# updates: each also runs the generator, 36.5% of the discriminator's FLOPs per token
# (bertgpt.compute.flops_per_token), so the run costs the FLOPs of bert-mini-mlm's 16,000.
COURSE["electra-mini"] = dict(base="bert-mini", model=dict(positions="rotary"), objective="rtd", width=0.5,
                              train=dict(_BERT_COURSE, nsp=False, snapshots=(), mask_rate=0.15, steps=11723))
# GPT-1's architecture ablation at mini size (chapter 3): one LSTM layer of 376 units has gpt-mini's
# parameter count (1.33M, tied embeddings included), on gpt-mini's short recipe, batches and BPE tokens.
# Its 1,300 updates were sized when gpt-mini's recipe had 850 (on one CPU thread the LSTM trains 1.52
# times as many tokens per second, bench/lstm_speed.py); the course's gpt-mini trains 12,000, so
# chapter 3 sets the LSTM beside the last snapshot of gpt-mini that has seen fewer tokens, not beside
# the finished model. It ships, with the three snapshots chapter 3's curves read, because it takes
# longer to train on first use (about 7 minutes on one thread) than any chapter can spend on it.
COURSE["lstm-mini"] = dict(base="gpt-mini", model=dict(arch="lstm", n_layer=1, d_ff=376),
                           train=dict(steps=1300, snapshots=(40, 150, 610)))
TABLE5 = {"MLM + NSP": "bert-mini", "MLM only": "bert-mini-mlm", "left to right": "bert-mini-ltr"}

# What each course model's card says of it (``scripts/ship_course_model.py`` writes the cards).
SUMMARY = {"gpt-mini": "GPT-1's objective and architecture at 1.3M parameters, pretrained on the addresses",
           "bert-mini": "BERT's objectives (MLM + NSP) at 1.4M parameters, pretrained on the addresses",
           "bert-mini-mlm": "Table 5's 'No NSP' in miniature: bert-mini's recipe with the masked LM alone",
           "bert-mini-ltr": "Table 5's 'LTR & No NSP' in miniature: bert-mini's recipe, shape and WordPiece "
                            "tokens, trained left to right",
           "electra-mini": "ELECTRA's discriminator in miniature: bert-mini-mlm's shape and tokens, trained "
                           "by replaced-token detection at the FLOPs of bert-mini-mlm's run",
           "lstm-mini": "GPT-1's LSTM ablation in miniature: gpt-mini's objective, tokens and parameter "
                        "count, with one LSTM layer in place of the Transformer"}
DEPARTURES = {
    "gpt-mini": "sizes (4 layers, d_model 128, context 128, a 4,096-token BPE), pre-LN blocks, no dropout "
                "while pretraining, bf16 autocast; otherwise GPT-1's (learned positions, tied output).",
    "bert-mini": "rotary positions instead of a learned table (with the table, the same budget stays on "
                 "the plateau of not reading its neighbours: bench/README.md); 40% of positions "
                 "chosen for prediction in training, not 15% (scored at 15%); every update at length "
                 "128; the sizes and pre-LN blocks of gpt-mini; no dropout while pretraining.",
}
DEPARTURES["bert-mini-mlm"] = ("those of bert-mini (its recipe, without the next-sentence loss): "
                               + DEPARTURES["bert-mini"])
DEPARTURES["bert-mini-ltr"] = ("those of bert-mini (its recipe, with causal attention, GPT's loss on every "
                               "token and no segment embeddings), whose own departures are: "
                               + DEPARTURES["bert-mini"])
DEPARTURES["lstm-mini"] = ("one LSTM layer of 376 units where GPT-1's ablation had 2,048, so that it has "
                            "gpt-mini's parameter count; gpt-mini's short recipe, run for 1,300 updates (the "
                            "time of its 850 on one thread); no dropout while pretraining.")
DEPARTURES["electra-mini"] = ("a generator half the discriminator's width, with its own embeddings (ELECTRA "
                              "ties them); the recipe and departures of bert-mini-mlm otherwise: "
                              + DEPARTURES["bert-mini"] + " Its masked-LM head is never trained: held-out "
                              "masked-token figures are near zero, by design.")

# The Try page (``book/_ext/try_models.py``): which shipped tokenizer each model reads (the variants ship
# bert-mini's, byte for byte), and the models each panel runs, in the order it shows them. Attention
# sets bert-mini-ltr beside bert-mini-mlm: BERT's Table 5 pair "LTR & No NSP" against "No NSP", the
# same recipe but for the attention mask. The page's JavaScript reads both from its manifest.
WIDGET_TOKENIZER = {"gpt-mini": "gpt-mini", "bert-mini": "bert-mini", "bert-mini-ltr": "bert-mini",
                    "bert-mini-mlm": "bert-mini"}
WIDGET_MODES = {"fill-mask": ("bert-mini", "gpt-mini"), "next-words": ("gpt-mini",),
                "attention": ("bert-mini-ltr", "bert-mini-mlm")}


def pretrained_configs(name: str, seed: int = 0, changes: dict | None = None, course: bool = False):
    """(model config, training config) of pretrained model ``name``, e.g. "bert-mini", with ``changes``;
    with ``course``, of the course model's recipe (``COURSE``; a Table 5 variant has no other)."""
    if name not in NAMES:
        raise ValueError(f"unknown pretrained model {name!r}; choose one of {', '.join(NAMES)}")
    if course and name not in COURSE:
        raise ValueError(f"{name!r} is not a course model; the course models are {', '.join(COURSE)}")
    course = course or "base" in COURSE.get(name, {})
    family, _, preset = COURSE.get(name, {}).get("base", name).partition("-")
    configs = model_config(preset, family), train_config(preset, family, seed=seed)
    if course:
        recipe = COURSE[name]
        configs = (dataclasses.replace(configs[0], **recipe["model"]),
                   dataclasses.replace(configs[1], **recipe["train"]))
    model, train = replace_fields(changes or {}, *configs)
    return pretraining_model(model, train), train


def recipe_tokenizer(name: str, tokenizer: str | None = None) -> str:
    """The tokenizer kind asked for, else the one course model ``name``'s recipe names, else its
    family's own (``DEFAULT_TOKENIZER``)."""
    return tokenizer or COURSE.get(name, {}).get("tokenizer") or DEFAULT_TOKENIZER[family_of(name)]


def family_of(name: str) -> str:
    """The family ("gpt" or "bert") of pretrained model ``name``: lstm-mini is a GPT-family language model."""
    return pretrained_configs(name)[0].default_family
