"""Pretrained models shared by the chapters: trained once, then loaded from a cache.

``pretrained("gpt-mini")`` pretrains the ``mini`` GPT on the corpus the first time (about three
minutes on two CPU cores) and saves it under ``$BERTGPT_CACHE/models`` (default
``~/.cache/bertgpt``); later calls load it. The cache key covers the model and training configs,
the corpus's content, the seed and the recipe version, so a change to any of them trains anew. An
entry that fails its checks (half-written, truncated, altered) is rebuilt, never loaded. A lock file
beside each entry lets one process at a time train and write it: two notebooks that ask for the same
cold model train it once, and the second loads what the first wrote.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings

from filelock import FileLock

from .checkpoint import Checkpoint, CheckpointError, load, save
from .config import FAMILIES, model_config, train_config
from .corpus import Corpus, load_corpus
from .pretraining import pretrain, summary
from .tokenizer import cache_dir

RECIPE = 1  # bump when pretraining changes in a way the configs do not show
NAMES = tuple(f"{family}-{size}" for family in FAMILIES for size in ("tiny", "mini", "small"))


def cache_path(name: str, corpus: Corpus, seed: int = 0):
    """The cache directory of pretrained model ``name`` on ``corpus``."""
    family, _, preset = name.partition("-")
    if name not in NAMES:
        raise ValueError(f"unknown pretrained model {name!r}; choose one of {', '.join(NAMES)}")
    cfg, tcfg = model_config(preset, family), train_config(preset, family, seed=seed)
    blob = json.dumps([dataclasses.asdict(cfg), dataclasses.asdict(tcfg), corpus.fingerprint, RECIPE])
    key = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{name}-{corpus.name}-{key}", cfg, tcfg


def pretrained(name: str, corpus: str | Corpus = "sotu", seed: int = 0, device=None,
               progress: bool = True) -> Checkpoint:
    """The pretrained model ``name`` ("gpt-mini", "bert-mini", ...), from the cache or trained now.

    Returns a :class:`~bertgpt.checkpoint.Checkpoint`: ``.model`` (in eval mode), ``.tokenizer``
    and ``.info`` (configs, metrics and the training history).
    """
    corpus = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    directory, cfg, tcfg = cache_path(name, corpus, seed)
    family = cfg.family
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(directory.with_name(directory.name + ".lock")):  # one writer per entry
        if directory.exists():
            try:
                return load(directory, family, device or "cpu")
            except CheckpointError as exc:
                warnings.warn(f"rebuilding the cached {name}: {exc}", stacklevel=2)
        model, tok, history = pretrain(corpus, cfg, tcfg, device=device, progress=progress)
        save(directory, model.cpu(), tok, name=name, corpus=corpus.name, train=dataclasses.asdict(tcfg),
             metrics=summary(model, history), history=dict(train=history.train, val=history.val))
    return load(directory, family, device or "cpu")


def resolve(checkpoint, family: str | None = None, device=None) -> Checkpoint:
    """A :class:`~bertgpt.checkpoint.Checkpoint` from itself, a pretrained name or a directory.

    With ``family``, one of the other family is refused before anything is loaded or trained.
    """
    if isinstance(checkpoint, Checkpoint):
        if family is not None and checkpoint.config.family != family:
            raise CheckpointError(f"this is a {checkpoint.config.family} model, but a {family} model is "
                                  f"needed here: give a {family} checkpoint")
        return checkpoint
    name = str(checkpoint)
    if name in NAMES:
        if family is not None and not name.startswith(family + "-"):
            raise CheckpointError(f"{name!r} is a {name.partition('-')[0]} model, but a {family} model is "
                                  f"needed here: give a {family} checkpoint, e.g. {family}-mini")
        return pretrained(name, device=device, progress=False)
    return load(checkpoint, family=family, device=device or "cpu")
