"""Checkpoints: model, config and tokenizer in one directory, written atomically, loaded safely.

A checkpoint directory holds ``config.json`` (the model config, its family, a SHA-256 of the weights
and whatever the caller adds: training config, metrics), ``model.safetensors`` and
``tokenizer.json``. :func:`save` writes a complete new directory beside the old one and swaps them
with renames, so an interrupted save leaves the previous checkpoint as it was. :func:`load` checks
the weights' hash before it builds anything: a truncated or altered file is refused, not loaded.
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

FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupt or of the wrong family."""


@dataclass
class Checkpoint:
    model: torch.nn.Module
    tokenizer: Tokenizer
    info: dict  # everything config.json holds: "config", "family", "train", "metrics", ...

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


def save(directory: str | Path, model, tokenizer: Tokenizer, **info) -> Path:
    """Write ``model`` and ``tokenizer`` (and JSON-able ``info``) to ``directory``, atomically."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    partial = directory.with_name(f".{directory.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    save_model(model, str(partial / "model.safetensors"))
    tokenizer.save(partial / "tokenizer.json")
    meta = dict(format=FORMAT, family=model.config.family, config=dataclasses.asdict(model.config),
                weights_sha256=_sha256(partial / "model.safetensors"), **info)
    (partial / "config.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    _fsync_dir(partial)
    old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    if directory.exists():
        os.replace(directory, old)  # from here to the next line, the old copy is kept as `old`
    os.replace(partial, directory)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def read_info(directory: str | Path) -> dict:
    """The checkpoint's config.json, or a :class:`CheckpointError` that says what is wrong."""
    directory = Path(directory)
    if not directory.is_dir():
        leftovers = sorted(directory.parent.glob(f".{directory.name}.old-*"))
        hint = f" (an interrupted save left {leftovers[0]}; rename it to recover)" if leftovers else ""
        raise CheckpointError(f"no checkpoint at {str(directory)!r}{hint}: train one with "
                              "`python -m bertgpt pretrain --out DIR` or bertgpt.save")
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
               if not (directory / f).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: {', '.join(missing)} missing")
    try:
        return json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint {str(directory)!r} has a corrupt config.json ({exc})") from None


def verify(directory: str | Path, info: dict) -> None:
    """Refuse weights that do not match the hash saved with them."""
    if _sha256(Path(directory) / "model.safetensors") != info.get("weights_sha256"):
        raise CheckpointError(f"checkpoint {str(directory)!r} is corrupt: model.safetensors does not match "
                              "the hash saved with it (an interrupted copy?); save or train it again")


def load(directory: str | Path, family: str | None = None, device="cpu") -> Checkpoint:
    """Load a checkpoint; with ``family`` ("gpt" or "bert"), refuse one of the other family."""
    directory = Path(directory)
    info = read_info(directory)
    if info.get("kind") == "classifier":
        raise CheckpointError(f"{str(directory)!r} holds a fine-tuned classifier: load it with "
                              "bertgpt.finetune.load_classifier")
    if family is not None and info.get("family") != family:
        raise CheckpointError(f"{str(directory)!r} holds a {info.get('family')} model, but a {family} model "
                              f"is needed here: give a {family} checkpoint")
    verify(directory, info)
    model = build(ModelConfig(**info["config"]))
    load_model(model, str(directory / "model.safetensors"), device=str(device))
    model.to(device).eval()
    return Checkpoint(model, Tokenizer.load(directory / "tokenizer.json"), info)
