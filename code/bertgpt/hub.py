"""Pretrained models shared by the chapters: trained once, then loaded from a cache.

``pretrained("gpt-mini")`` pretrains the ``mini`` GPT on the corpus the first time (about four
minutes on two CPU cores, with a progress bar) and saves it under ``$BERTGPT_CACHE/models``
(default ``~/.cache/bertgpt``); later calls load it. The cache key covers the model and training
configs, the corpus's content, the seed and the recipe version, so a change to any of them trains
anew. An entry that fails its checks (half-written, truncated, malformed, of another format) is
rebuilt, never loaded.

This module and the command line are the only places where a name becomes a checkpoint; the
library's functions take :class:`~bertgpt.checkpoint.Checkpoint` objects. ``untrained(name)`` is the
same architecture with random weights and the same tokenizer, for from-scratch baselines: it
never pretrains anything.

A lock file beside each entry lets one process at a time train and write it: two notebooks that
ask for the same cold model train it once, and the second loads what the first wrote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import warnings

import torch
from filelock import FileLock

from .checkpoint import Checkpoint, CheckpointError, load, save
from .config import FAMILIES, model_config, train_config
from .corpus import Corpus, load_corpus
from .model import build
from .pretraining import prepare, pretrain, summary
from .tokenizer import cache_dir

RECIPE = 2  # bump when pretraining changes in a way the configs do not show
# Training fields that say how a run executes, as the device does, not what it learns: not in the key.
RUN_ONLY = ("precision", "compile")
NAMES = tuple(f"{family}-{size}" for family in FAMILIES for size in ("tiny", "mini", "small"))


def pretrained_configs(name: str, seed: int = 0):
    """(model config, training config) of pretrained model ``name``, e.g. "bert-mini"."""
    if name not in NAMES:
        raise ValueError(f"unknown pretrained model {name!r}; choose one of {', '.join(NAMES)}")
    family, _, preset = name.partition("-")
    return model_config(preset, family), train_config(preset, family, seed=seed)


def cache_path(name: str, corpus: Corpus, seed: int = 0):
    """The cache directory of pretrained model ``name`` on ``corpus``."""
    cfg, tcfg = pretrained_configs(name, seed)
    train = {k: v for k, v in dataclasses.asdict(tcfg).items() if k not in RUN_ONLY}
    blob = json.dumps([dataclasses.asdict(cfg), train, corpus.fingerprint, RECIPE])
    key = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{name}-{corpus.name}-{key}"


def _corpus(corpus: str | Corpus) -> Corpus:
    return corpus if isinstance(corpus, Corpus) else load_corpus(corpus)


@contextlib.contextmanager
def training_threads():
    """Train on ``$BERTGPT_THREADS`` threads, else on every core (8 at most), then restore the caller's.

    Chapters run their own small computations on one thread; a cold ``pretrained()`` inside them
    should still use the whole machine.
    """
    caller = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("BERTGPT_THREADS") or min(os.cpu_count() or 1, 8)))
    try:
        yield
    finally:
        torch.set_num_threads(caller)


def pretrained(name: str, corpus: str | Corpus = "sotu", seed: int = 0, device=None,
               progress: bool = True) -> Checkpoint:
    """The pretrained model ``name`` ("gpt-mini", "bert-mini", ...), from the cache or trained now.

    Returns a :class:`~bertgpt.checkpoint.Checkpoint`: ``.model`` (in eval mode), ``.tokenizer``
    and ``.info`` (configs, metrics and the training history).
    """
    corpus = _corpus(corpus)
    cfg, tcfg = pretrained_configs(name, seed)
    directory = cache_path(name, corpus, seed)
    family = cfg.family
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(directory.with_name(directory.name + ".lock")):  # one writer per entry
        if directory.exists():
            try:
                return load(directory, family, device or "cpu")
            except CheckpointError as exc:
                warnings.warn(f"rebuilding the cached {name}: {exc}", stacklevel=2)
        with training_threads():
            model, tok, history = pretrain(corpus, cfg, tcfg, device=device, progress=progress)
        save(directory, model.cpu(), tok, name=name, corpus=corpus.name, train=dataclasses.asdict(tcfg),
             metrics=summary(model, history), history=dict(train=history.train, val=history.val))
    return load(directory, family, device or "cpu")


def untrained(name: str, corpus: str | Corpus = "sotu", seed: int = 0) -> Checkpoint:
    """The architecture and tokenizer of pretrained model ``name`` with random weights (seeded)."""
    cfg, _ = pretrained_configs(name, seed)
    tok, cfg = prepare(_corpus(corpus), cfg)
    torch.manual_seed(seed)
    return Checkpoint(build(cfg).eval(), tok, dict(name=name, family=cfg.family, untrained=True))
