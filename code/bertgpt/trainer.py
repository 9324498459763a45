"""One training loop for every objective in the course. It knows nothing about the model.

It takes a model, a loss function ``loss_fn(model, batch) -> loss`` or ``-> (loss, metrics)``, an
iterator of batches and a :class:`~bertgpt.config.TrainConfig`; GPT pretraining, BERT's MLM + NSP
and fine-tuning (L_task + λ·L_LM) all go through it::

    history = train(model, clm_loss, batches, TrainConfig(steps=500), val_batches)
    history.val[-1]["loss"]
"""

from __future__ import annotations

import math
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .config import TrainConfig


def default_device() -> str:
    """CUDA if present, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def to_device(batch, device):
    """Move a tensor, or a tuple/list/dict of them, to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return type(batch)(to_device(v, device) for v in batch)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """The learning-rate multiplier at update ``step``: linear warm-up, then the chosen decay."""
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    if cfg.decay == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.decay == "linear":
        return 1 - progress
    return 1.0


@dataclass
class History:
    """What a run measured: training loss per logged step and every validation, for plots."""

    train: list[dict] = field(default_factory=list)  # {"step", "loss", "lr"}
    val: list[dict] = field(default_factory=list)    # {"step", "loss", and the loss function's metrics}
    seconds: float = 0.0
    tokens: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def _split(out):
    return out if isinstance(out, tuple) else (out, {})


@torch.no_grad()
def validate(model, loss_fn, batches, device=None) -> dict:
    """Mean loss and metrics over ``batches``, in eval mode (no dropout)."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    totals, n = {}, 0
    for batch in batches:
        loss, metrics = _split(loss_fn(model, to_device(batch, device)))
        for k, v in {"loss": loss, **metrics}.items():
            totals[k] = totals.get(k, 0.0) + float(v)
        n += 1
    model.train(was_training)
    return {k: v / max(n, 1) for k, v in totals.items()}


def _count_tokens(batch) -> int:
    first = batch[0] if isinstance(batch, (tuple, list)) else next(iter(batch.values()))
    return first.numel()


def train(model, loss_fn, batches, cfg: TrainConfig, val_batches=None, device=None,
          progress: bool = True, desc: str = "train", log_every: int = 10) -> History:
    """Train ``model`` in place for ``cfg.steps`` updates; return the :class:`History`.

    AdamW (weight decay on matrices only), warm-up then cosine/linear decay, gradient clipping,
    gradient accumulation, bf16 autocast on CUDA. ``val_batches`` (a list, reused at every
    evaluation) is scored every ``cfg.eval_every`` updates and at the end.
    """
    device = torch.device(device or default_device())
    torch.manual_seed(cfg.seed)
    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [dict(params=[p for p in params if p.dim() >= 2], weight_decay=cfg.weight_decay),
              dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0)]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext())
    history = History()
    bar = tqdm(total=cfg.steps, desc=desc, disable=not progress or bool(os.environ.get("BERTGPT_QUIET")),
               mininterval=1.0, leave=False)
    running, start, eval_seconds = 0.0, time.perf_counter(), 0.0
    for step in range(cfg.steps):
        for _ in range(cfg.accumulate):
            batch = to_device(next(batches), device)
            history.tokens += _count_tokens(batch)
            with autocast:
                loss, _ = _split(loss_fn(model, batch))
            (loss / cfg.accumulate).backward()
            running += loss.detach()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        if done % log_every == 0 or done == cfg.steps:
            n = log_every if done % log_every == 0 else done % log_every
            history.train.append(dict(step=done, loss=float(running) / (n * cfg.accumulate),
                                      lr=schedule.get_last_lr()[0]))
            running = 0.0
            bar.set_postfix(loss=f"{history.train[-1]['loss']:.3f}", refresh=False)
        if val_batches is not None and (done % cfg.eval_every == 0 or done == cfg.steps):
            tic = time.perf_counter()
            history.val.append(dict(step=done, **validate(model, loss_fn, val_batches, device)))
            eval_seconds += time.perf_counter() - tic  # validation time is not training time
        bar.update(1)
    bar.close()
    history.seconds = time.perf_counter() - start - eval_seconds
    return history
