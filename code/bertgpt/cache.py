"""The model cache: where a trained model is kept, under which key, and who may write it.

An entry is a checkpoint directory in ``$BERTGPT_CACHE/models`` (default ``~/.cache/bertgpt``) named
``NAME-CORPUS-KEY``. The key is a hash of everything that decides what the run learns: the model and
training configs, less the fields that only say how a run executes (:data:`RUN_ONLY`), the corpus's
content, the tokenizer's kind (and the tokenizer trainer's version where the tokenizer is learned from
the corpus) and :data:`RECIPE`. Beside an entry lie its lock (``.lock``: one writer at a time), the
interrupted run it is trained from (``.partial``) and the weights at its snapshots (``.snapshots``).
Which configs a name means, and whether a model ships instead, :mod:`bertgpt.hub` decides.

Results smaller than a model, a probe's accuracies or a fine-tuning run's test score, are kept as JSON
by :func:`kept`, each under its own key, so that a chapter reads what an earlier one measured.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

from filelock import FileLock

from .checkpoint import Checkpoint, CheckpointError, load
from .corpus import Corpus
from .tokenizer import TRAINER as TOKENIZER_TRAINER
from .tokenizer import cache_dir

#: In every key. Bump it when pretraining changes in a way the configs do not show.
RECIPE = 3
#: The training fields that say how a run executes, not what it learns, and are in no key.
RUN_ONLY = ("precision", "compile")


def recipe_fields(config) -> dict:
    """``config`` (a model or training config) as plain JSON values, less :data:`RUN_ONLY`: what of it
    decides the weights a run ends with."""
    fields = json.loads(json.dumps(dataclasses.asdict(config)))  # tuples become lists, as once stored
    return {k: v for k, v in fields.items() if k not in RUN_ONLY}


def same_recipe(info: dict, cfg, tcfg) -> bool:
    """Whether the checkpoint whose stored ``info`` this is was trained by model config ``cfg`` and
    training config ``tcfg``, less :data:`RUN_ONLY`. A field the configs gained since it was saved
    reads as its default; the vocabulary's size is the tokenizer's, and the NSP head follows the
    training config's ``nsp``, which is compared."""
    stored = recipe_fields(type(cfg)(**info["config"]))
    asked = recipe_fields(cfg)
    derived = dict(vocab_size=None, nsp_head=None)
    return ({**stored, **derived} == {**asked, **derived}
            and recipe_fields(type(tcfg)(**info["train"])) == recipe_fields(tcfg))


def entry_path(name: str, corpus: Corpus, cfg, tcfg, tokenizer: str, learned: bool) -> Path:
    """The entry of model ``name`` trained by ``cfg`` and ``tcfg`` on ``corpus``, reading a ``tokenizer``
    of that kind (``learned``: trained on ``corpus`` by this package, not a shipped one)."""
    parts = [recipe_fields(cfg), recipe_fields(tcfg), corpus.fingerprint, tokenizer, RECIPE]
    if learned:
        parts.append(f"tokenizer trainer {TOKENIZER_TRAINER}")
    return cache_dir() / "models" / f"{name}-{corpus.name}-{digest(parts, 12)}"


def continued_path(start: Path, corpus: Corpus, steps: int, recipe: dict | None = None,
                   objective: str | None = None) -> Path:
    """The entry of the model in entry ``start`` after ``steps`` more updates on ``corpus`` (with
    ``recipe``'s changes to its training config, and another ``objective`` than its own if given)."""
    parts = [start.name, corpus.fingerprint, steps, sorted((recipe or {}).items()), RECIPE]
    key = digest(parts + [objective] if objective else parts, 12)
    return start.parent / f"{start.name}+{corpus.name}-{steps}-{key}"


def digest(parts: list, length: int = 16) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``parts`` as JSON (anything JSON cannot write,
    as its ``str``): a cache key of everything that decides a result."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:length]


def kept(kind: str, name: str | None, compute):
    """What ``compute()`` returns (JSON-serialisable), kept in ``$BERTGPT_CACHE/KIND/NAME.json``: a later
    call with the same ``name`` reads it instead of computing again. ``name`` None (a result that has
    no key, such as one of weights built in memory) computes every time. The file is written whole,
    then renamed: a reader never sees half of one, and an interrupted call leaves nothing behind."""
    path = cache_dir() / kind / f"{name}.json"
    if name and path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    out = compute()
    if name:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
            json.dump(out, f)
        os.replace(f.name, path)
    return out


def snapshot_path(directory: Path, step: int) -> Path:
    """Where the weights after ``step`` updates of the run of entry ``directory`` are kept."""
    return directory.with_name(directory.name + ".snapshots") / f"step-{step:06d}"


def partial_path(directory: Path) -> Path:
    """Where the run that will write entry ``directory`` keeps its resumable checkpoint."""
    return directory.with_name(directory.name + ".partial")


def lock(directory: Path):
    """The lock (a ``filelock.FileLock``) a process holds while it checks, trains or writes entry
    ``directory``."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(directory.with_name(directory.name + ".lock"))


def cached(directory: Path, family: str, device, label: str,
           snapshot: Path | None = None) -> Checkpoint | None:
    """Entry ``directory`` (or its ``snapshot``), or None when there is none or it is damaged (with a
    warning, naming ``label``, that it will be rebuilt). Call it holding the entry's :func:`lock`."""
    if not directory.exists():
        return None
    try:
        ck = load(directory, family, device or "cpu")
        return ck if snapshot is None else load(snapshot, family, device or "cpu")
    except CheckpointError as exc:
        warnings.warn(f"rebuilding the cached {label}: {exc}", stacklevel=3)
        return None
