"""Where a model runs, on the bottom floor: inference, scoring and training all need these, and none
of them needs the training loop::

    device = device_of(model)            # the device of its parameters
    with eval_mode(model): ...            # dropout off inside, the mode as it was after
    batch = to_device(batch, device)      # a tensor, or a dict/tuple/list of them
"""

from __future__ import annotations

import contextlib

import torch


def default_device() -> str:
    """CUDA if present, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def device_of(model: torch.nn.Module) -> torch.device:
    """The device of a model's parameters."""
    return next(model.parameters()).device


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """Dropout off inside the block (generating, scoring, evaluating), then the mode as it was."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def to_device(batch, device):
    """Move a tensor, or a tuple/list/dict of them, to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return type(batch)(to_device(v, device) for v in batch)
