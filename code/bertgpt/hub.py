"""Pretrained models by name: shipped with the package, or trained once and cached.

The course models, ``pretrained("gpt-mini")`` and ``pretrained("bert-mini")``, are pretrained at a
real budget by this package's own code and ship inside it (``bertgpt/models/NAME``, with a model
card: ``bertgpt card NAME``); they load in seconds, offline, hash-checked, and ``python -m bertgpt
pretrain --recipe NAME`` retrains one from scratch. Their snapshots (``step=``) are the course
recipe's first updates: those the chapters read ship too (``bertgpt/models/NAME/snapshots``), and
any other is trained on first use and cached. BERT's Table 5 ships beside them, in miniature
(``TABLE5``): ``bert-mini-mlm`` (the masked LM without NSP) and ``bert-mini-ltr`` (the same
Transformer trained left to right), each bert-mini's recipe with one change, on its tokens;
``electra-mini``, ELECTRA's discriminator at bert-mini-mlm's compute (:func:`electra`, chapter 9); and
``lstm-mini``, GPT-1's LSTM ablation on gpt-mini's tokens (chapter 3). Every shipped weight is stored
in fp16.

Every other model goes through the cache: a mini with ``changes``, on another corpus or with another
tokenizer follows the mini's short recipe (``course=False``), as do the tiny and small presets. The
first call pretrains it (minutes on two CPU cores for a mini, with a progress bar) and saves it under
``$BERTGPT_CACHE/models`` (default ``~/.cache/bertgpt``); later calls load it. The entry's key
(:mod:`bertgpt.cache`) covers the model and training configs, the corpus's content, the tokenizer and
the recipe version, so a change to any of them trains anew. A shipped model is found by its recipe, not
by a key: asked for with the configs, corpus and tokenizer it was trained with, the package's copy
loads. Every model on the addresses with the course models' kind and size of tokenizer reads their
shipped tokenizer (:func:`share_tokenizer`); one whose tokenizer is learned from its corpus is keyed by
the tokenizer trainer's version too. An entry that fails its checks (half-written, truncated, malformed,
of another format) is rebuilt, never loaded.

This module and the command line are the only places where a name becomes a checkpoint; the
library's functions take :class:`~bertgpt.checkpoint.Checkpoint` objects. ``untrained(name)`` is the
same architecture with random weights and the same tokenizer, for from-scratch baselines: it
never pretrains anything.

A lock beside each entry lets one process at a time train and write it: two notebooks that ask for
the same cold model train it once, and the second loads what the first wrote. The training itself is
:func:`bertgpt.pretraining.pretraining_run`'s, the command line's too.

Variants and snapshots go through the same cache::

    pretrained("bert-mini", changes=dict(mask_rate=0.15, steps=1200))  # its own entry, its own key
    pretrained("gpt-mini", step=100)   # the course model after 100 of its 12,000 updates
    pretrained("gpt-mini", tokenizer="char")  # another kind of tokenizer (bertgpt.tokenizer.KINDS)

``changes`` sets fields of the model or training config (whichever has the field); the weights at
the updates ``PretrainConfig.snapshots`` lists are saved beside the entry, in ``<entry>.snapshots``,
before the entry itself, so an entry that exists has all its snapshots.

Continued pretraining (a cached mini, trained further on another corpus with its own objective and
tokenizer) has its own cached route, :func:`adapted`::

    adapted("gpt-mini", "kjv", steps=300)   # gpt-mini of the addresses, then 300 updates on the Bible
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import torch

from .cache import (  # noqa: F401  snapshot_path, cache_dir and RUN_ONLY re-exported: the cache's paths
    RUN_ONLY,
    cached,
    continued_path,
    entry_path,
    lock,
    partial_path,
    same_recipe,
    snapshot_path,
)
from .checkpoint import Checkpoint, load, save
from .config import ModelConfig, PretrainConfig
from .corpus import Corpus, load_corpus
from .data import pretraining_data
from .device import training_threads
from .model import build
from .objectives import pretraining_loss
from .pretraining import (
    as_masked_lm,
    continuation_config,
    continue_pretraining,
    prepare,
    pretraining_run,
    save_run,
)
from .registry import (  # noqa: F401  re-exported: the hub serves these names
    COURSE,
    DEFAULT_TOKENIZER,
    NAMES,
    TABLE5,
    family_of,
    pretrained_configs,
    recipe_tokenizer,
)
from .tokenizer import cache_dir, tokenizer_path  # noqa: F401  cache_dir re-exported
from .trainer import validate

SHIPPED = Path(__file__).parent / "models"


def is_course(name: str, corpus: Corpus | None = None, changes: dict | None = None,
              tokenizer: str | None = None, course: bool | None = None) -> bool:
    """Whether ``name`` means its course recipe: ``course`` when given (True only for a course model),
    else when ``name`` is a course model asked for as it ships: on the addresses, with no ``changes``
    and its recipe's own tokenizer."""
    if "base" in COURSE.get(name, {}):  # a course variant exists only as its course recipe
        return True
    if course is not None:
        return course
    if name not in COURSE or changes or tokenizer not in (None, recipe_tokenizer(name)):
        return False
    return corpus is None or corpus.fingerprint == _shipped_info(name).get("corpus_fingerprint")


def _shipped_info(name: str) -> dict:
    """The stored info (``config.json``) of course model ``name`` as it ships, or {} when it does not."""
    info = SHIPPED / name / "config.json"
    return json.loads(info.read_text(encoding="utf-8")) if info.is_file() else {}


def shipped_path(name: str, corpus: Corpus, cfg: ModelConfig, tcfg: PretrainConfig,
                 tokenizer: str) -> Path | None:
    """The package's copy of model ``name`` when one ships that this recipe trained: the same model
    and training configs (less how a run executes), corpus and tokenizer kind. A field the configs
    gained after a model shipped reads as its default, so it changes no match until a recipe sets it.
    The vocabulary's size is the tokenizer's, and the NSP head the training config's ``nsp``."""
    info = _shipped_info(name)
    same = info and same_recipe(info, cfg, tcfg) and (
        (info["corpus_fingerprint"], info["tokenizer_kind"]) == (corpus.fingerprint, tokenizer))
    return SHIPPED / name if same else None


def card(name: str) -> dict:
    """The model card of course model ``name``: recipe, corpus, provenance, held-out metrics, loss curve."""
    path = SHIPPED / name / "card.json"
    if name not in COURSE or not path.is_file():
        shipped = sorted(p.parent.name for p in SHIPPED.glob("*/card.json"))
        raise ValueError(f"no model card for {name!r}; the shipped course models are "
                         f"{', '.join(shipped) or 'none yet'}")
    return json.loads(path.read_text(encoding="utf-8"))


def course_models() -> str:
    """One line naming the two course models by the first 12 hex digits of their weights' hashes,
    which every chapter prints first: the same line on every page means one pair of models (the
    Table 5 variants, which chapter 4 alone uses, have cards of their own)."""
    return "course models: " + ", ".join(f"{name} {card(name)['provenance']['weights_sha256'][:12]}"
                                         for name in COURSE if "base" not in COURSE[name])


def _run(name: str, corpus: Corpus, seed: int = 0, changes: dict | None = None, tokenizer: str | None = None,
         course: bool | None = None):
    """(model config, training config, tokenizer kind, cache directory) of model ``name`` on ``corpus``:
    of its course recipe when :func:`is_course`."""
    course = is_course(name, corpus, changes, tokenizer, course)
    cfg, tcfg = pretrained_configs(name, seed, changes, course)
    kind = recipe_tokenizer(name, tokenizer)
    learned = shipped_tokenizer(corpus, kind, cfg.vocab_size) is None
    return cfg, tcfg, kind, entry_path(name, corpus, cfg, tcfg, kind, learned)


def cache_path(name: str, corpus: Corpus, seed: int = 0, changes: dict | None = None,
               tokenizer: str | None = None, course: bool | None = None) -> Path:
    """The cache directory of pretrained model ``name`` (with ``changes``, and the ``tokenizer`` kind
    when it is not the family's own; of its course recipe when :func:`is_course`) on ``corpus``."""
    return _run(name, corpus, seed, changes, tokenizer, course)[3]


def _corpus(corpus: str | Corpus) -> Corpus:
    return corpus if isinstance(corpus, Corpus) else load_corpus(corpus)


def pretrained(name: str, corpus: str | Corpus = "sotu", seed: int = 0, device=None,
               progress: bool = True, *, changes: dict | None = None, step: int | None = None,
               tokenizer: str | None = None, course: bool | None = None) -> Checkpoint:
    """The pretrained model ``name`` ("gpt-mini", "bert-mini", ...), shipped, cached or trained now.

    "gpt-mini" and "bert-mini" on the addresses, unchanged, are the course models (``COURSE``):
    the shipped weights, loaded from the package in seconds. ``changes`` (field -> value) makes a
    variant: its own recipe, its own cache entry. ``step`` asks for the weights after that many
    updates, one of the recipe's ``snapshots``. ``tokenizer`` ("bpe", "wordpiece" or "char")
    replaces the family's own kind (GPT "bpe", BERT "wordpiece"). ``course`` overrides which recipe
    a course model's name means (:func:`is_course`): ``course=False`` is the mini's short recipe,
    ``course=True`` a variant of the course recipe (trained on first use, cached like every entry).

    Returns a :class:`~bertgpt.checkpoint.Checkpoint`: ``.model`` (in eval mode), ``.tokenizer``
    and ``.info`` (configs, metrics and the training history; a snapshot's ``info["step"]`` says which).
    """
    if COURSE.get(name, {}).get("objective") == "rtd":  # not a language model: its own route
        if step is not None or tokenizer is not None:
            raise ValueError(f"{name} keeps no snapshots and reads its recipe's tokenizer only")
        return electra(corpus, seed=seed, changes=changes, device=device, progress=progress)
    corpus = _corpus(corpus)
    cfg, tcfg, kind, directory = _run(name, corpus, seed, changes, tokenizer, course)
    if step is not None and step not in (*tcfg.snapshots, tcfg.steps):
        raise ValueError(f"{name} keeps its weights after updates {', '.join(map(str, tcfg.snapshots))} "
                         f"and {tcfg.steps} (the end), not {step}: ask for one of those")
    family = cfg.default_family
    snapshot = None if step in (None, tcfg.steps) else snapshot_path(directory, step)
    shipped = shipped_path(name, corpus, cfg, tcfg, kind)
    share_tokenizer(corpus, cfg, kind)
    if shipped is not None and snapshot is None:
        return load(shipped, family, device or "cpu")  # hash-checked, as every checkpoint
    if shipped is not None and (kept := shipped / "snapshots" / snapshot.name).is_dir():
        return load(kept, family, device or "cpu")  # a snapshot that ships
    with lock(directory):  # one writer per entry
        if shipped is not None:  # a snapshot of a shipped model: the recipe's first updates, kept
            if not snapshot.exists():  # trained up to this one, keeping the earlier ones on the way
                _train_entry(name, corpus, cfg, tcfg, directory, progress, device, kind, changes, until=step)
            return load(snapshot, family, device or "cpu")
        if (ck := cached(directory, family, device, name, snapshot)) is not None:
            return ck
        _train_entry(name, corpus, cfg, tcfg, directory, progress, device, kind, changes)
    return load(directory if snapshot is None else snapshot, family, device or "cpu")


def shipped_tokenizer(corpus: Corpus, kind: str, vocab_size: int) -> Path | None:
    """The tokenizer file a course model ships for ``corpus``, of ``kind`` and the requested
    ``vocab_size``, if one does (gpt-mini's BPE and bert-mini's WordPiece, on the addresses)."""
    for name, recipe in COURSE.items():
        if "base" in recipe or _shipped_info(name).get("corpus_fingerprint") != corpus.fingerprint:
            continue  # a Table 5 variant ships its base model's tokenizer
        cfg = pretrained_configs(name, course=True)[0]
        if (recipe_tokenizer(name), cfg.vocab_size) == (kind, vocab_size):
            return SHIPPED / name / "tokenizer.json"
    return None


def share_tokenizer(corpus: Corpus, cfg, kind: str | None = None) -> bool:
    """Put the shipped tokenizer of ``kind`` (default: the family's own) and ``cfg``'s vocabulary size
    where training on ``corpus`` looks for one, when a course model ships it and none is there yet.
    Every model on the addresses then reads the course models' token ids, whichever entry was
    trained first (the shipped tokenizers come from Hugging Face's trainer, whose numbering changed
    from run to run; one learned again here would differ in about 65 of 4,096). Returns whether the
    tokenizer is a shipped one, not learned from ``corpus``."""
    kind = kind or DEFAULT_TOKENIZER[cfg.default_family]
    source = shipped_tokenizer(corpus, kind, cfg.vocab_size)
    path = tokenizer_path(corpus, kind, cfg.vocab_size)
    if source is not None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        shutil.copyfile(source, partial)
        os.replace(partial, path)  # whole or not at all
    return source is not None


def _train_entry(name, corpus, cfg, tcfg, directory, progress, device, tokenizer, changes, until=None):
    """Pretrain ``name`` into entry ``directory``, writing each snapshot as it is reached. The run
    keeps a resumable checkpoint beside the entry (:func:`~bertgpt.cache.partial_path`): an interrupted
    first call costs only the updates since the last evaluation, and a run stopped at ``until`` goes
    on from there when a later snapshot or the entry is asked for."""
    info = dict(name=name, corpus=corpus.name, train=dataclasses.asdict(tcfg), changes=changes or {})

    def keep(step, model, tok):
        save(snapshot_path(directory, step), model, tok, step=step, tokenizer_kind=tok.kind, **info)

    with training_threads():
        pretraining_run(corpus, cfg, tcfg, directory, work=partial_path(directory), tokenizer=tokenizer,
                        device=device, progress=progress, until=until, on_snapshot=keep, name=name,
                        changes=changes or {})


def untrained(name: str, corpus: str | Corpus = "sotu", seed: int = 0,
              changes: dict | None = None) -> Checkpoint:
    """The architecture and tokenizer of pretrained model ``name`` with random weights (seeded): of
    the course model, with its shipped tokenizer, where ``pretrained`` would give the course model."""
    corpus = _corpus(corpus)
    cfg, _, kind, _ = _run(name, corpus, seed, changes)
    share_tokenizer(corpus, cfg, kind)
    tok, cfg = prepare(corpus, cfg, kind)
    torch.manual_seed(seed)
    return Checkpoint(build(cfg).eval(), tok, dict(name=name, family=cfg.default_family, untrained=True))


def adapted(name: str, corpus: str | Corpus, steps: int, *, base: str | Corpus = "sotu", seed: int = 0,
            changes: dict | None = None, recipe: dict | None = None, objective: str | None = None,
            device=None, progress: bool = True) -> Checkpoint:
    """Pretrained model ``name`` (of ``base``, with ``changes``) after ``steps`` more updates on ``corpus``.

    The route of ULMFiT's middle stage, cached: the base model comes from :func:`pretrained`, then
    :func:`~bertgpt.pretraining.continue_pretraining` trains it on ``corpus``'s training documents
    with its own objective, tokenizer and recipe (:func:`~bertgpt.pretraining.continuation_config`,
    with ``recipe``'s training fields on top, e.g. ``dict(lr=3e-4)``). The entry's key covers the
    base entry's key, ``corpus``'s content and the continuation's config, so another corpus, step
    count or recipe is another entry; it is written atomically under its own lock, as
    :func:`pretrained`'s are. ``info["coverage"]`` holds the tokenizer's fit to ``corpus`` (beside
    its fit to ``base``), ``info["start"]`` the base model's validation figures on ``corpus`` before
    the first update, ``info["metrics"]`` those after the last. ``objective="masked"`` first rebuilds
    a left-to-right model as a masked LM (:func:`~bertgpt.pretraining.as_masked_lm`), so that it goes
    on with BERT's objective: causal, then masked.
    """
    if objective not in (None, "masked"):
        raise ValueError(f"objective is None (the model's own) or 'masked', not {objective!r}")
    corpus, base = _corpus(corpus), _corpus(base)
    base_ck = pretrained(name, base, seed, device, progress, changes=changes)
    if objective == "masked":
        base_ck = as_masked_lm(base_ck, seed)
    tcfg = continuation_config(base_ck, steps, **(recipe or {}))
    directory = adapted_path(name, corpus, steps, base=base, seed=seed, changes=changes, recipe=recipe,
                             objective=objective)
    family = base_ck.model.family
    with lock(directory):
        if (ck := cached(directory, family, device, directory.name)) is not None:
            return ck
        with training_threads():
            start = _validation(base_ck, corpus, tcfg)
            model, tok, history = continue_pretraining(base_ck, corpus, tcfg, reference=base, device=device,
                                                       progress=progress)
        start_entry = cache_path(name, base, seed, changes).name + (f", as {objective}" if objective else "")
        save_run(directory, model, tok, history, corpus, dataclasses.asdict(tcfg), name=name,
                 changes=changes or {}, init=start_entry, base=base.name,
                 start=start, coverage=history.setup["coverage"])
    return load(directory, family, device or "cpu")


def electra(corpus: str | Corpus = "sotu", steps: int | None = None, *, seed: int = 0,
            width: float | None = None, changes: dict | None = None, device=None,
            progress: bool = True) -> Checkpoint:
    """ELECTRA's discriminator (:func:`~bertgpt.pretraining.pretrain_electra`) by electra-mini's recipe
    (``COURSE["electra-mini"]``: bert-mini-mlm's shape and tokens, the FLOPs of its run), or after
    ``steps`` updates, with a generator ``width`` times as wide and ``changes`` as
    :func:`pretrained`'s. On the addresses, as it ships, it loads from the package; any other run is
    trained on first use and cached. The checkpoint is a BERT without NSP, which fine-tunes as
    bert-mini-mlm does; its masked-LM head is never trained."""
    corpus, recipe = _corpus(corpus), COURSE["electra-mini"]
    width = recipe["width"] if width is None else width
    changes = {**(changes or {}), **({} if steps is None else {"steps": steps})}
    cfg, tcfg = pretrained_configs("electra-mini", seed, changes, course=True)
    kind = recipe_tokenizer("electra-mini")
    share_tokenizer(corpus, cfg, kind)
    if width == recipe["width"] and (shipped := shipped_path("electra-mini", corpus, cfg, tcfg, kind)):
        return load(shipped, "bert", device or "cpu")
    learned = shipped_tokenizer(corpus, kind, cfg.vocab_size) is None
    directory = entry_path(f"electra-mini-{width:g}", corpus, cfg, tcfg, kind, learned)
    with lock(directory):
        if (ck := cached(directory, "bert", device, directory.name)) is not None:
            return ck
        with training_threads():  # resumable, as every entry: the run keeps a checkpoint beside it
            pretraining_run(corpus, cfg, tcfg, directory, work=partial_path(directory), tokenizer=kind,
                            device=device, progress=progress, width=width, name="electra-mini",
                            changes=changes)
    return load(directory, "bert", device or "cpu")


def adapted_path(name: str, corpus: Corpus, steps: int, *, base: Corpus, seed: int = 0,
                 changes: dict | None = None, recipe: dict | None = None,
                 objective: str | None = None) -> Path:
    """The cache directory of :func:`adapted`'s entry: keyed by the base entry, ``corpus``, the recipe
    and the ``objective`` it goes on with."""
    return continued_path(cache_path(name, base, seed, changes), corpus, steps, recipe, objective)


def _validation(ck: Checkpoint, corpus: Corpus, tcfg) -> dict:
    """``ck``'s validation figures on ``corpus``, on the batches a continued run validates on."""
    _, val = pretraining_data(corpus, ck.tokenizer, ck.config, tcfg, ck.model.family)
    return validate(ck.model, pretraining_loss(ck.model.family, tcfg), val)
