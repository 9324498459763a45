"""Checkpoints: model, config and tokenizer in one directory, written atomically, loaded safely.

A checkpoint directory holds ``config.json`` (the model config, its family, a SHA-256 of the weights
and whatever the caller adds: training config, metrics), ``model.safetensors`` and
``tokenizer.json``, and for an unfinished run ``training.pt`` (optimizer, schedule, step and RNG
state, to resume it). :func:`save` writes a complete new directory beside the old one and swaps them
with renames, so an interrupted save leaves the previous checkpoint as it was. :func:`load` checks
the format version, the config and the weights' hash before it builds anything: whatever is
missing, malformed, truncated or altered is refused with a :class:`CheckpointError` that names the
file and the fix, never loaded. One loader serves pretrained models and fine-tuned classifiers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model

from .config import ModelConfig
from .model import build
from .tokenizer import Tokenizer

FORMAT = 1  #: the layout of a checkpoint directory; a checkpoint of another format is refused
KINDS = ("model", "classifier")


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, malformed, corrupt or of the wrong family or kind."""


@dataclass
class Checkpoint:
    """A model with its tokenizer and what ``config.json`` says about it."""

    model: torch.nn.Module  #: a GPT or BERT (or a fine-tuned classifier around one)
    tokenizer: Tokenizer
    info: dict  #: everything config.json holds — "config", "family", "train", "metrics", ...

    @property
    def config(self) -> ModelConfig:
        return self.model.config


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    for f in path.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


def save(directory: str | Path, model, tokenizer: Tokenizer, training_state: dict | None = None,
         **info) -> Path:
    """Write ``model`` and ``tokenizer`` (and JSON-able ``info``) to ``directory``, atomically.

    ``training_state`` (a :meth:`bertgpt.trainer.Run.state_dict`) is saved too, so the run can resume.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    partial = directory.with_name(f".{directory.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    save_model(model, str(partial / "model.safetensors"))
    tokenizer.save(partial / "tokenizer.json")
    if training_state is not None:
        torch.save(training_state, partial / "training.pt")
    meta = dict(format=FORMAT, kind=info.pop("kind", "model"), family=model.family,
                config=dataclasses.asdict(model.config),
                weights_sha256=_sha256(partial / "model.safetensors"), **info)
    (partial / "config.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    _fsync_dir(partial)
    old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    if directory.exists():
        os.replace(directory, old)  # from here to the next line, the old copy is kept as `old`
    os.replace(partial, directory)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def _where(directory: Path, name: str = "") -> str:
    return repr(str(directory / name) if name else str(directory))


def read_info(directory: str | Path) -> dict:
    """The checkpoint's config.json, checked, or a :class:`CheckpointError` that says what is wrong."""
    directory = Path(directory)
    if not directory.is_dir():
        leftovers = sorted(directory.parent.glob(f".{directory.name}.old-*"))
        hint = f" (an interrupted save left {leftovers[0]}; rename it to recover)" if leftovers else ""
        raise CheckpointError(f"no checkpoint at {_where(directory)}{hint}: train one with "
                              "`python -m bertgpt pretrain --out DIR` or bertgpt.save")
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
               if not (directory / f).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {_where(directory)} is incomplete ({', '.join(missing)} missing): "
                              "save or train it again")
    fix = "save or train the checkpoint again (a cached one is rebuilt by bertgpt.pretrained)"
    where = _where(directory, "config.json")
    try:
        info = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where} is not valid JSON ({exc}): {fix}") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        found = info.get("format") if isinstance(info, dict) else None
        raise CheckpointError(f"{where} is of checkpoint format {found!r}, and this version of bertgpt "
                              f"reads format {FORMAT}: {fix}")
    try:
        info["config"] = dataclasses.asdict(ModelConfig(**info["config"]))
        if info.get("kind", "model") not in KINDS or info["family"] not in ("gpt", "bert"):
            raise ValueError(f"unknown kind {info.get('kind')!r} or family {info['family']!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where} is malformed ({type(exc).__name__}: {exc}): {fix}") from None
    return info


def verify(directory: str | Path, info: dict) -> None:
    """Refuse weights that do not match the hash saved with them."""
    if _sha256(Path(directory) / "model.safetensors") != info.get("weights_sha256"):
        raise CheckpointError(f"{_where(Path(directory), 'model.safetensors')} does not match the hash saved "
                              "with it (an interrupted copy?): save or train the checkpoint again")


def load(directory: str | Path, family: str | None = None, device="cpu", kind: str = "model",
         wrap=None) -> Checkpoint:
    """Load a checkpoint, in eval mode; with ``family`` ("gpt" or "bert"), refuse one of the other family.

    ``kind`` is "model" (a pretrained GPT or BERT) or "classifier"; for the latter, ``wrap(model,
    tokenizer, info)`` builds the module around the model before the weights are loaded
    (:func:`bertgpt.finetune.load_classifier` does this).
    """
    directory = Path(directory)
    info = read_info(directory)
    if info.get("kind", "model") != kind:
        use = "bertgpt.load_classifier" if info.get("kind") == "classifier" else "bertgpt.load"
        raise CheckpointError(f"{_where(directory)} holds a {info.get('kind', 'model')}, not a {kind}: "
                              f"load it with {use}")
    if family is not None and info["family"] != family:
        raise CheckpointError(f"{_where(directory)} holds a {info['family']} model, but a {family} model "
                              f"is needed here: give a {family} checkpoint")
    verify(directory, info)
    model = build(ModelConfig(**info["config"]), info["family"])
    tokenizer = Tokenizer.load(directory / "tokenizer.json")
    module = wrap(model, tokenizer, info) if wrap is not None else model
    try:
        load_model(module, str(directory / "model.safetensors"), device=str(device))
    except (RuntimeError, OSError) as exc:
        raise CheckpointError(f"{_where(directory, 'model.safetensors')} does not fit its config.json "
                              f"({str(exc).splitlines()[0]}): save or train the checkpoint again") from None
    module.to(device).eval()
    return Checkpoint(module, tokenizer, info)


def load_training_state(directory: str | Path) -> dict:
    """The optimizer, schedule, step and RNG state saved with an unfinished run, to resume it."""
    path = Path(directory) / "training.pt"
    if not path.is_file():
        raise CheckpointError(f"{_where(Path(directory))} has no training state (training.pt): it is a "
                              "finished run, or was not saved by `pretrain --out`; nothing to resume")
    try:
        return torch.load(path, weights_only=True)
    except Exception as exc:  # a truncated or foreign file: any unpickling error
        raise CheckpointError(f"{_where(path)} is unreadable ({type(exc).__name__}): start the run "
                              "again") from None
