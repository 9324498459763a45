"""Where a model runs, on the bottom floor: inference, scoring and training all need these, and none
of them needs the training loop::

    device = device_of(model)            # the device of its parameters
    with eval_mode(model): ...            # dropout off inside, the mode as it was after
    batch = to_device(batch, device)      # a tensor, or a dict/tuple/list of them
    with training_threads(): ...          # $BERTGPT_THREADS threads, else the idle cores
"""

from __future__ import annotations

import contextlib
import os
import time

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


def idle_cores(window: float = 0.1) -> int:
    """How many cores no process is using now, at least 1: read from ``/proc/stat`` over ``window``
    seconds on Linux; every core where it cannot be read."""
    cores = os.cpu_count() or 1

    def sample():  # (idle, total) ticks of all cores since boot
        with open("/proc/stat") as f:
            ticks = [int(t) for t in f.readline().split()[1:]]
        return ticks[3] + ticks[4], sum(ticks)  # idle + iowait

    try:
        idle, total = sample()
        time.sleep(window)
        idle2, total2 = sample()
    except (OSError, ValueError, IndexError):
        return cores
    if total2 <= total:
        return cores
    return max(1, min(cores, round(cores * (idle2 - idle) / (total2 - total))))


@contextlib.contextmanager
def training_threads():
    """Train on ``$BERTGPT_THREADS`` threads, else on the idle cores (8 at most), then restore the caller's.

    Chapters run their own small computations on one thread; what they wait for, a cold
    ``pretrained()`` and every ``finetune()``, should still use the whole machine, but not the cores
    another process is busy on: two processes whose threads outnumber the cores wait for each other
    at every operation. Measured on 2 cores, a bert-mini variant trained on 2 threads beside a
    chapter busy on the other core ran at 322 tokens/s, against about 4,600 on one thread; alone,
    a fine-tuning run of chapter 8 took 20.5 s on 2 threads and 27.4 s on one.
    """
    caller = torch.get_num_threads()
    wanted = os.environ.get("BERTGPT_THREADS")
    if wanted is not None and not (wanted.isdigit() and int(wanted) > 0):
        raise ValueError(f"BERTGPT_THREADS must be a whole number of threads (1 or more), not {wanted!r}")
    torch.set_num_threads(int(wanted) if wanted else min(idle_cores(), 8))
    try:
        yield
    finally:
        torch.set_num_threads(caller)
