"""Configurations: one small typed object for the model, one for the training loop (and one for a
pretraining run, the loop with its recipe), one for fine-tuning, and named presets.

A preset names a size; the family (``"gpt"`` or ``"bert"``) decides the one switch that separates
the two 2018 models, the causal mask, and whether segment embeddings exist::

    cfg = model_config("mini", "bert")           # bidirectional, two segment types
    deep = dataclasses.replace(cfg, n_layer=8)   # variants are copies, never mutations
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

from .device import PRECISIONS  # TrainConfig.precision; bertgpt.device resolves "auto"

FAMILIES = ("gpt", "bert")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 4096   #: tokens in the vocabulary, special tokens included
    context: int = 128       #: longest sequence the position embeddings cover
    n_layer: int = 4         #: Transformer blocks
    n_head: int = 4          #: attention heads per block; d_model must divide by it
    d_model: int = 128       #: width of the residual stream
    d_ff: int = 512          #: hidden width of each block's feed-forward network
    dropout: float = 0.1     #: on embeddings, attention weights and residual branches
    causal: bool = True      #: True — position i sees only positions <= i (GPT); False — all (BERT)
    segments: int = 0        #: segment (A/B) embedding types — 0 for GPT, 2 for BERT
    norm: str = "post"       #: "post" — LayerNorm after each residual add (both 2018 papers); "pre" — GPT-2
    arch: str = "transformer"  #: "transformer"; "lstm" — GPT-1's ablation, an LSTM of d_ff units per layer
    positions: str = "learned"  #: "learned" — a vector per position (both papers); "rotary" — see model.py
    nsp_head: bool = True    #: BERT — a pooler and next-sentence head on [CLS]; False — the masked LM alone

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', not {self.norm!r}")
        if self.arch not in ("transformer", "lstm"):
            raise ValueError(f"arch must be 'transformer' or 'lstm', not {self.arch!r}")
        if self.positions not in ("learned", "rotary"):
            raise ValueError(f"positions must be 'learned' or 'rotary', not {self.positions!r}")
        if self.positions == "rotary" and (self.d_model // self.n_head) % 2:
            raise ValueError(f"rotary positions turn pairs of coordinates: the head size "
                             f"d_model/n_head = {self.d_model // self.n_head} must be even")
        for name in ("vocab_size", "context", "n_layer", "n_head", "d_model", "d_ff"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), not {self.dropout}")

    @property
    def default_family(self) -> str:
        """The family :func:`bertgpt.model.build` makes of this config when none is named: GPT when
        causal. A built model's own ``family`` (its class's) is the one every caller reads."""
        return "gpt" if self.causal else "bert"


@dataclass(frozen=True)
class TrainConfig:
    """The training loop's settings: how many updates, of what size, on what schedule.

    Every run of :func:`bertgpt.trainer.train` takes one; fine-tuning builds its own. What a
    pretraining run learns from is :class:`PretrainConfig`, which adds the recipe to these.
    """

    steps: int = 1000          #: optimizer updates
    batch_size: int = 32       #: sequences per micro-batch
    accumulate: int = 1        #: micro-batches per update (effective batch = batch_size * accumulate)
    lr: float = 1e-3           #: peak learning rate, reached at the end of warm-up
    warmup: int = 100          #: linear warm-up, in updates
    decay: str = "cosine"      #: after warm-up — "cosine" or "linear" to zero, or "constant"
    weight_decay: float = 0.01  #: AdamW, on weight matrices and embeddings; not on biases or LayerNorms
    grad_clip: float = 1.0     #: global gradient-norm clip; 0 turns it off
    eval_every: int = 200      #: validate every this many updates (and at the end)
    eval_batches: int = 20     #: validation batches per evaluation
    seed: int = 0              #: model initialisation, dropout and the order of batches
    # How to run, not what to learn: neither is in a pretrained model's cache key (bertgpt.cache).
    precision: str = "auto"    #: "fp32", "bf16", "fp16" or "auto" (bertgpt.device.resolve_precision)
    compile: bool = False      #: torch.compile the forward pass (compiling costs time at the start)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.decay not in ("cosine", "linear", "constant"):
            raise ValueError(f"decay must be 'cosine', 'linear' or 'constant', not {self.decay!r}")
        for name in ("steps", "batch_size", "accumulate", "eval_every", "eval_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")


@dataclass(frozen=True)
class PretrainConfig(TrainConfig):
    """A pretraining run: the loop's settings (:class:`TrainConfig`) and the recipe on top, BERT's
    data fields, the run's dropout and the updates whose weights are kept."""

    mask_rate: float = 0.15    #: BERT — fraction of positions chosen for prediction (in training)
    val_mask_rate: float = 0.15  #: BERT — the rate validation and held-out figures mask, whatever mask_rate
    mask_split: tuple[float, ...] = (0.8, 0.1, 0.1)  #: BERT — chosen tokens to [MASK], random, kept
    nsp: bool = True           #: BERT — next-sentence loss; False — MLM alone, B always the real next
    short_fraction: float = 0.0  #: BERT — fraction of the updates trained on sequences of short_length
    short_length: int = 64     #: BERT — the length of those sequences (the paper — 90% of updates at 128)
    dropout: float | None = None  #: the model's dropout while this run trains; None — as the model was built
    snapshots: tuple[int, ...] = ()  #: updates after which pretraining also evaluates and keeps the weights

    def __post_init__(self):
        super().__post_init__()
        for name in ("mask_rate", "val_mask_rate"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must lie strictly between 0 and 1, not {getattr(self, name)}")
        object.__setattr__(self, "mask_split", tuple(float(s) for s in self.mask_split))  # JSON gives a list
        if len(self.mask_split) != 3 or min(self.mask_split) < 0 or abs(sum(self.mask_split) - 1) > 1e-6:
            raise ValueError(f"mask_split must be three shares ([MASK], random, unchanged) that sum to 1, "
                             f"not {self.mask_split}")
        if not 0 <= self.short_fraction <= 1:
            raise ValueError(f"short_fraction must lie in [0, 1], not {self.short_fraction}")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1) or be None, not {self.dropout}")
        if self.short_length < 1:
            raise ValueError(f"short_length must be a positive integer, not {self.short_length}")
        if any(s < 1 for s in self.snapshots):
            raise ValueError(f"snapshots must be positive update numbers, not {self.snapshots}")
        # sorted, as a tuple (JSON gives a list); those a shortened run never reaches are dropped
        object.__setattr__(self, "snapshots", tuple(sorted({s for s in self.snapshots if s < self.steps})))


def pretraining_model(cfg: ModelConfig, train: PretrainConfig) -> ModelConfig:
    """``cfg`` as pretraining with ``train`` builds it: a BERT has the pooler and next-sentence head
    only when its recipe trains next-sentence prediction (``train.nsp``; a GPT has neither, and
    ignores the field)."""
    return dataclasses.replace(cfg, nsp_head=train.nsp)


#: The fine-tuning learning rate of each family when ``FinetuneConfig.lr`` is None: measured best on
#: validation for the minis (bench/finetune_sweep.py).
FINETUNE_LR = {"gpt": 1e-3, "bert": 3e-4}


@dataclass(frozen=True)
class FinetuneConfig:
    """The fine-tuning recipe: one run is one optimizer and one schedule (warm-up, then linear decay).

    ``lr`` and ``epochs`` were chosen on validation by ``bench/finetune_sweep.py`` (lr 1e-4, 3e-4,
    1e-3 against 3 and 6 epochs; 300 examples of ``era`` and ``next``, both minis, 3 seeds; the table
    is in ``bench/README.md``): 6 epochs beat 3 everywhere; GPT scored best at 1e-3 on both tasks,
    BERT at 3e-4 on both (:data:`FINETUNE_LR`). These are 5 to 50 times the papers' rates (GPT-1
    6.25e-5, BERT 2e-5 to 5e-5), for models about a hundred times smaller, on a few hundred examples.

    ``readout`` None reads what ``bench/finetune_study.py`` measured best (``bench/README.md``): for a
    GPT on a two-class pair task (``next``), its own language model's gain, log p(B | A) - log p(B)
    ("gain", :class:`bertgpt.finetune.GainClassifier`); everywhere else each paper's summary
    ("summary": GPT-1's ``[EXTRACT]`` state, BERT's pooled ``[CLS]``). On ``next``, 300 labels, three
    seeds, GPT-1's head stayed at 50-58% on validation (means of three seeds) whatever the learning
    rate, λ, readout of every state or start of the special tokens' embeddings (50.7% on 1,000 test
    pairs), while gpt-mini's gain, cut where the training pairs split best, scores 72-75% before any
    update (73.5% on the test pairs): the new head threw away what pretraining gave. Fine-tuning
    then moves the whole model; every epoch ended below the start there, at rates from 1e-5 to
    1e-3, and the start is kept unless an epoch beats it on validation.
    """

    epochs: int = 6            #: passes over the training examples, at most (early stopping may end sooner)
    lr: float | None = None    #: peak learning rate; None — the family's, FINETUNE_LR
    batch_size: int = 16       #: examples per update
    warmup: float = 0.1        #: fraction of all updates spent warming up; then linear decay to zero
    weight_decay: float = 0.01  #: AdamW, as in pretraining
    lm_coef: float = 0.5       #: GPT's λ of the auxiliary LM loss (GPT-1 — 0.5); BERT has none
    freeze: int = 0            #: keep the embeddings and the lower ``freeze`` blocks fixed
    patience: int = 2          #: stop after this many epochs without a better validation accuracy
    restarts: int = 1          #: runs with other seeds; the best on validation is kept (BERT, section 4.1)
    seed: int = 0              #: classifier initialisation, dropout, batch order
    readout: str | None = None  #: what the classifier reads (bertgpt.finetune.READOUTS); None — as below

    def __post_init__(self):
        for name in ("epochs", "batch_size", "patience", "restarts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if self.freeze < 0 or not 0 <= self.warmup < 1 or (self.lr is not None and self.lr <= 0):
            raise ValueError(f"freeze must be >= 0, warmup in [0, 1) and lr > 0, not {self.freeze}, "
                             f"{self.warmup} and {self.lr}")


# Sizes. The papers' presets carry the papers' vocabularies, context lengths and post-LN blocks, so
# that building them (on the meta device) reproduces the parameter counts: GPT-1 40,478 BPE tokens
# (40,000 merges), BERT 30,522 WordPiece tokens; both 512 positions. The course's own sizes use pre-LN:
# measured here, a post-LN mini GPT sits on the unigram plateau (loss 6.55) for the first 300 updates
# at lr 1e-3 or 3e-4, where the pre-LN one is down to 5.7, and a CPU budget has no time to wait.
_SIZES = {
    "tiny": dict(vocab_size=512, context=32, n_layer=2, n_head=2, d_model=32, d_ff=64, norm="pre"),
    "mini": dict(vocab_size=4096, context=128, n_layer=4, n_head=4, d_model=128, d_ff=512, norm="pre"),
    "small": dict(vocab_size=8192, context=256, n_layer=6, n_head=6, d_model=384, d_ff=1536, norm="pre"),
    "gpt1": dict(vocab_size=40478, context=512, n_layer=12, n_head=12, d_model=768, d_ff=3072),
    "bert-base": dict(vocab_size=30522, context=512, n_layer=12, n_head=12, d_model=768, d_ff=3072),
    "bert-large": dict(vocab_size=30522, context=512, n_layer=24, n_head=16, d_model=1024, d_ff=4096),
}
_PAPER_FAMILY = {"gpt1": "gpt", "bert-base": "bert", "bert-large": "bert"}

# Training budgets per size. "mini" is sized for minutes on 2 CPU cores.
_TRAINING = {
    "tiny": dict(steps=50, batch_size=8, lr=3e-3, warmup=10, eval_every=25, eval_batches=4),
    "mini": dict(steps=850, batch_size=16, lr=3e-3, warmup=100, eval_every=250, eval_batches=16, dropout=0.0,
                 snapshots=(10, 25, 50, 100, 200, 400)),
    "small": dict(steps=20000, batch_size=64, lr=6e-4, warmup=1000, eval_every=1000, eval_batches=50),
    "gpt1": dict(steps=100000, batch_size=64, lr=2.5e-4, warmup=2000, eval_every=2000),
    "bert-base": dict(steps=1000000, batch_size=256, lr=1e-4, warmup=10000, decay="linear"),
    "bert-large": dict(steps=1000000, batch_size=256, lr=1e-4, warmup=10000, decay="linear"),
}
# The minis' recipes were chosen by measurement (bench/levers.py; table in bench/README.md, "Levers").
# Both pretrain without dropout: at this budget it only slows learning (gpt-mini 4.85 -> 4.78 nats at
# equal updates; 22-48% faster steps) and fine-tuning puts it back, since the model keeps its
# dropout=0.1. gpt-mini gains from lr 3e-3 (4.78 -> 4.74). BERT learns only at the positions it masks
# and sits on a plateau while attention learns to read the neighbours of a [MASK]: at lr 2e-3 it never
# left it in 3,000 updates, so it keeps 1e-3. Two departures from the paper's recipe, named as such:
# it masks 40% of positions, not 15% (Wettig et al. 2023: more masking helps; here MLM accuracy
# 14.5% -> 15.9% and NSP left chance, 49% -> 73%, at equal updates), and it trains the first half of
# its updates on sequences of 64 tokens (the paper's short-then-long schedule, at other lengths; 25%
# less compute, same accuracy). Validation masks the paper's 15% so that the accuracy means the same.
_BERT_TRAINING = {
    "mini": dict(steps=2400, lr=1e-3, warmup=150, eval_every=400, mask_rate=0.4, short_fraction=0.5,
                 short_length=64, snapshots=(100, 200, 400, 800, 1600)),
}
PRESETS = tuple(_SIZES)


def _check_preset(name: str) -> None:
    if name not in _SIZES:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


def model_config(preset: str, family: str | None = None, **overrides) -> ModelConfig:
    """The model configuration of a named preset for ``family`` ("gpt" or "bert").

    The papers' presets imply their family; the generic sizes need one.
    """
    _check_preset(preset)
    family = family or _PAPER_FAMILY.get(preset)
    if family not in FAMILIES:
        raise ValueError(f"preset {preset!r} needs a family: 'gpt' or 'bert', not {family!r}")
    if preset in _PAPER_FAMILY and _PAPER_FAMILY[preset] != family:
        raise ValueError(f"preset {preset!r} is a {_PAPER_FAMILY[preset]} model, not a {family} one")
    causal = family == "gpt"
    return ModelConfig(causal=causal, segments=0 if causal else 2, **{**_SIZES[preset], **overrides})


def train_config(preset: str, family: str | None = None, **overrides) -> PretrainConfig:
    """The pretraining configuration that goes with a named preset (and family: BERT's can differ)."""
    _check_preset(preset)
    bert = _BERT_TRAINING.get(preset, {}) if family == "bert" else {}
    return PretrainConfig(**{**_TRAINING[preset], **bert, **overrides})


def replace_fields(changes: dict, *configs):
    """Copies of ``configs`` with ``changes`` (field name -> value) applied to whichever config has
    each field; an unknown field is rejected by name."""
    out = [{} for _ in configs]
    for name, value in changes.items():
        for cfg, change in zip(configs, out):
            if name in {f.name for f in dataclasses.fields(cfg)}:
                change[name] = value
                break
        else:
            known = sorted(f.name for cfg in configs for f in dataclasses.fields(cfg))
            raise ValueError(f"unknown field {name!r}; known fields: {', '.join(known)}")
    return tuple(dataclasses.replace(cfg, **change) for cfg, change in zip(configs, out))


def _parse(text: str, kind, name: str):
    if typing.get_origin(kind) is tuple:  # "10,25,50"
        return tuple(_parse(t, typing.get_args(kind)[0], name) for t in text.split(",") if t.strip())
    optional = type(None) in typing.get_args(kind)  # `float | None`: "none" means None
    if optional:
        if text.lower() == "none":
            return None
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    kind = {"int": int, "float": float, "bool": bool, "str": str}.get(kind, kind)
    if kind is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"--set {name}={text}: expected true or false")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"--set {name}={text}: expected a value of type {kind.__name__}") from None


def apply_overrides(assignments: list[str], *configs):
    """Apply ``FIELD=VALUE`` strings (the command line's ``--set``) to whichever of ``configs`` has
    the field; returns the configs, in order, as new objects.

    Unknown fields and values of the wrong type are rejected by name.
    """
    types = {}
    for cfg in reversed(configs):  # the first config that has a field takes it, as in replace_fields
        types.update(typing.get_type_hints(type(cfg)))
    changes = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: write FIELD=VALUE, for example n_layer=4")
        if name not in types:
            raise ValueError(f"--set: unknown field {name!r}; known fields: {', '.join(sorted(types))}")
        changes[name] = _parse(text, types[name], name)
    return replace_fields(changes, *configs)
