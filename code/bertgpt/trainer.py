"""One training loop for every objective in the course. It knows nothing about the model.

It takes a model, a loss function ``loss_fn(model, batch) -> loss`` or ``-> (loss, metrics)``, an
iterator of batches and a :class:`~bertgpt.config.TrainConfig`; GPT pretraining, BERT's MLM + NSP
and fine-tuning (L_task + λ·L_LM) all go through it, with one optimizer and one schedule per run::

    history = train(model.to(device), clm_loss, batches, TrainConfig(steps=500),
                    evaluate=validation(clm_loss, val_batches))
    history.val[-1]["loss"]

The ``evaluate`` hook (minGPT's callbacks, reduced to the one the course needs) runs every
``cfg.eval_every`` updates and at the end. It receives the :class:`Run` and returns the metrics to
record; it may set ``run.stop`` to end training early. :class:`KeepBest` wraps a hook to stop early
and keep the best weights; ``run.state_dict()`` is what a resumed run needs besides the weights.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
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


def precision(device: torch.device):
    """The autocast context of a device: bf16 on CUDA, full precision elsewhere (the one place to change)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


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
    """What a run measured: training loss per logged step and every evaluation, for plots."""

    train: list[dict] = field(default_factory=list)  # {"step", "loss", "lr"}
    val: list[dict] = field(default_factory=list)    # {"step", and the evaluation hook's metrics}
    seconds: float = 0.0
    tokens: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


@dataclass
class Run:
    """A run in progress, as the evaluation hook sees it."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    history: History
    step: int = 0       #: updates done
    stop: bool = False  #: set it to end training after this evaluation

    def state_dict(self) -> dict:
        """What resuming needs besides the weights: optimizer moments, schedule, step, history, RNG."""
        h = self.history
        return dict(step=self.step, optimizer=self.optimizer.state_dict(),
                    schedule=self.schedule.state_dict(), rng=torch.get_rng_state(),
                    history=dict(train=list(h.train), val=list(h.val), tokens=h.tokens))

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        h = state["history"]
        self.history.train, self.history.val = list(h["train"]), list(h["val"])
        self.history.tokens = h["tokens"]
        torch.set_rng_state(state["rng"])


def _split(out):
    return out if isinstance(out, tuple) else (out, {})


@torch.no_grad()
def validate(model, loss_fn, batches) -> dict:
    """Mean loss and metrics over ``batches``, in eval mode (no dropout)."""
    device = device_of(model)
    totals, n = {}, 0
    with eval_mode(model):
        for batch in batches:
            loss, metrics = _split(loss_fn(model, to_device(batch, device)))
            for k, v in {"loss": loss, **metrics}.items():
                totals[k] = totals.get(k, 0.0) + float(v)
            n += 1
    return {k: v / max(n, 1) for k, v in totals.items()}


def validation(loss_fn, batches):
    """An evaluation hook: :func:`validate` on ``batches`` (a list, reused at every evaluation)."""
    return lambda run: validate(run.model, loss_fn, batches)


class KeepBest:
    """An evaluation hook around another: it keeps the weights of the best evaluation and stops
    after ``patience`` evaluations without a better ``metric`` (higher is better; None: never stops).

    After training, ``restore(model)`` puts the best weights back; ``best`` and ``best_step`` say which.
    """

    def __init__(self, evaluate, metric: str, patience: int | None = None):
        self.evaluate, self.metric, self.patience = evaluate, metric, patience
        self.best, self.best_step, self.state, self._waited = -math.inf, 0, None, 0

    def __call__(self, run: Run) -> dict:
        metrics = self.evaluate(run)
        if metrics[self.metric] > self.best:
            self.best, self.best_step, self._waited = metrics[self.metric], run.step, 0
            self.state = copy.deepcopy(run.model.state_dict())
        else:
            self._waited += 1
            run.stop = self.patience is not None and self._waited >= self.patience
        return metrics

    def restore(self, model) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)


def _count_tokens(batch) -> int:
    first = batch[0] if isinstance(batch, (tuple, list)) else next(iter(batch.values()))
    return first.numel()


def train(model, loss_fn, batches, cfg: TrainConfig, *, evaluate=None, progress: bool | str = True,
          resume: dict | None = None) -> History:
    """Train ``model`` in place, on its device, for ``cfg.steps`` updates; return the :class:`History`.

    AdamW (weight decay on weight matrices and embeddings, not on biases or LayerNorm gains), warm-up
    then cosine/linear decay, gradient clipping, gradient accumulation, bf16 autocast on CUDA. One
    optimizer and one schedule serve the whole run. ``evaluate(run) -> metrics`` runs every
    ``cfg.eval_every`` updates and at the end (see the module docstring). ``progress`` shows a bar
    with the time left (a string labels it). ``resume`` is a ``run.state_dict()`` saved by an earlier
    run of the same configuration: training continues from its step, skipping the batches it
    consumed, and reaches the weights the uninterrupted run would have.
    """
    device = device_of(model)
    torch.manual_seed(cfg.seed)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [dict(params=[p for p in params if p.dim() >= 2], weight_decay=cfg.weight_decay),
              dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0)]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))
    run = Run(model, optimizer, schedule, History())
    if resume is not None:
        run.load_state_dict(resume)
        for _ in range(run.step * cfg.accumulate):  # the same stream of batches, from where it stopped
            next(batches)
    quiet = not progress or bool(os.environ.get("BERTGPT_QUIET"))
    bar = tqdm(total=cfg.steps, initial=run.step, desc=progress if isinstance(progress, str) else "train",
               disable=quiet, mininterval=1.0, leave=False)
    running, logged, start, eval_seconds = 0.0, 0, time.perf_counter(), 0.0
    while run.step < cfg.steps and not run.stop:
        for _ in range(cfg.accumulate):
            batch = to_device(next(batches), device)
            run.history.tokens += _count_tokens(batch)
            with precision(device):
                loss, _ = _split(loss_fn(model, batch))
            (loss / cfg.accumulate).backward()
            running += loss.detach()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        run.step += 1
        logged += 1
        evaluating = evaluate is not None and (run.step % cfg.eval_every == 0 or run.step == cfg.steps)
        if run.step % 10 == 0 or run.step == cfg.steps or evaluating:
            run.history.train.append(dict(step=run.step, loss=float(running) / (logged * cfg.accumulate),
                                          lr=schedule.get_last_lr()[0]))
            running, logged = 0.0, 0
            bar.set_postfix(loss=f"{run.history.train[-1]['loss']:.3f}", refresh=False)
        if evaluating:
            tic = time.perf_counter()
            run.history.val.append(dict(step=run.step, **evaluate(run)))
            eval_seconds += time.perf_counter() - tic  # evaluation time is not training time
        bar.update(1)
    bar.close()
    run.history.seconds = time.perf_counter() - start - eval_seconds
    return run.history
