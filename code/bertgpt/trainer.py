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

The same loop runs bigger without a change to its callers: :func:`~bertgpt.device.precision` picks
the number format (``cfg.precision``), ``cfg.compile`` compiles the forward pass, and under
``torchrun`` (after :func:`~bertgpt.device.init_distributed`) each process trains on its own share
of the batches with DistributedDataParallel. The loss function must then *call* the model
(``model(...)``), since that call is what DDP and the compiler wrap. The runtime itself (devices,
number formats, torchrun) lives in :mod:`bertgpt.device`; its names are re-exported here.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .config import TrainConfig
from .device import (  # noqa: F401  the runtime: re-exported, as chapters and scripts import it from here
    _gather,
    barrier,
    cpu_has_bf16,
    default_device,
    device_of,
    eval_mode,
    finish_distributed,
    grad_scaler,
    init_distributed,
    is_main,
    precision,
    resolve_precision,
    to_device,
    world,
)
from .progress import progress_bar


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
    val: list[dict] = field(default_factory=list)    # {"step", "seconds" trained so far, the hook's metrics}
    seconds: float = 0.0
    tokens: int = 0     # seen by all processes together
    setup: dict = field(default_factory=dict)  # how it ran: precision, compile, fused AdamW, processes
    snapshots: dict = field(default_factory=dict)  # update -> weights (a state dict), kept by pretraining

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def _rng_state(device: torch.device) -> dict:
    state = dict(cpu=torch.get_rng_state())
    if device.type == "cuda":  # dropout on a GPU draws from the GPU's generator
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


@dataclass
class Run:
    """A run in progress, as the evaluation hook sees it."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    history: History
    scaler: torch.amp.GradScaler | None = None  #: fp16's gradient scaler (disabled otherwise)
    step: int = 0       #: updates done
    stop: bool = False  #: set it to end training after this evaluation

    def state_dict(self) -> dict:
        """What resuming needs besides the weights: optimizer moments, schedule, gradient scale, step,
        history, random state. Under torchrun every process must call it: it gathers each one's
        random state (the rest is the same in all)."""
        h, rng = self.history, _rng_state(device_of(self.model))
        return dict(step=self.step, optimizer=self.optimizer.state_dict(),
                    schedule=self.schedule.state_dict(), rng=_gather(rng) if world()[1] > 1 else rng,
                    scaler=self.scaler.state_dict() if self.scaler is not None else {},
                    history=dict(train=list(h.train), val=list(h.val), tokens=h.tokens))

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        if state["scaler"] and self.scaler is not None and self.scaler.is_enabled():
            self.scaler.load_state_dict(state["scaler"])
        h = state["history"]
        self.history.train, self.history.val = list(h["train"]), list(h["val"])
        self.history.tokens = h["tokens"]
        rng = state["rng"]
        if isinstance(rng, list):  # one per process of a torchrun run
            rng = rng[world()[0] % len(rng)]
        torch.set_rng_state(rng["cpu"])
        device = device_of(self.model)
        if "cuda" in rng and device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], device)


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

    def start(self, model, metrics: dict) -> dict:
        """Count the weights before the first update as an evaluation (``metrics``, step 0): a run
        that starts from a trained decision keeps it unless training beats it."""
        self.best, self.best_step, self._waited = metrics[self.metric], 0, 0
        self.state = copy.deepcopy(model.state_dict())
        return metrics

    def restore(self, model) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)


def _count_tokens(batch) -> int:
    first = batch[0] if isinstance(batch, (tuple, list)) else next(iter(batch.values()))
    return first.numel()


def optimizer_for(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices and embeddings, not on biases or LayerNorm gains;
    the fused CUDA kernel when every parameter is on a GPU."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [dict(params=[p for p in params if p.dim() >= 2], weight_decay=cfg.weight_decay),
              dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0)]
    fused = all(p.is_cuda for p in params)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), **({"fused": True} if fused else {}))


def train(model, loss_fn, batches, cfg: TrainConfig, *, evaluate=None, eval_at: tuple[int, ...] = (),
          progress: bool | str = True, resume: dict | None = None, until: int | None = None) -> History:
    """Train ``model`` in place, on its device, for ``cfg.steps`` updates; return the :class:`History`.

    AdamW (:func:`optimizer_for`), warm-up then cosine/linear decay, gradient clipping, gradient
    accumulation, autocast in ``cfg.precision`` (:func:`~bertgpt.device.precision`; fp16 with a
    gradient scaler), ``torch.compile`` if ``cfg.compile``. One optimizer and one schedule serve the
    whole run.
    ``evaluate(run) -> metrics`` runs every ``cfg.eval_every`` updates, after each update ``eval_at``
    names, and at the end (see the module docstring). ``progress`` shows a bar with the time left (a
    string labels it). ``resume`` is a ``run.state_dict()`` saved by an earlier run of the same
    configuration: training continues from its step, skipping the batches it consumed, and reaches
    the weights the uninterrupted run would have.
    ``until`` stops after that many updates, evaluating there, with the schedule of all ``cfg.steps``:
    the first updates of the run, exactly (a model card's recipe is checked this way).

    Under torchrun (a process group of N), process r takes batches r, r + N, r + 2N, ... of
    ``batches`` (every process builds the same seeded stream), and DDP averages the gradients, so an
    update sees N·``cfg.accumulate`` micro-batches: the update a single process makes with
    ``accumulate`` N times larger. Every process runs ``evaluate``; only rank 0 shows progress.
    """
    run, net, ddp, batches = _start(model, batches, cfg, resume)
    device, (rank, size) = device_of(model), world()
    bar = progress_bar(label=progress if isinstance(progress, str) else "train", total=cfg.steps,
                       initial=run.step, enabled=progress and rank == 0)
    autocast = precision(device, cfg.precision)
    running, logged, start, eval_seconds = 0.0, 0, time.perf_counter(), 0.0
    last = min(until or cfg.steps, cfg.steps)
    while run.step < last and not run.stop:
        running = _update(run, net, ddp, loss_fn, batches, cfg, autocast, running)
        run.step += 1
        logged += 1
        evaluating = evaluate is not None and (run.step % cfg.eval_every == 0 or run.step == last
                                               or run.step in eval_at)
        if run.step % 10 == 0 or run.step == last or evaluating:
            if size > 1:  # the loss of all processes' batches, not only rank 0's
                running = torch.as_tensor(running, dtype=torch.float32, device=device)
                dist.all_reduce(running)
                running = running / size
            run.history.train.append(dict(step=run.step, loss=float(running) / (logged * cfg.accumulate),
                                          lr=run.schedule.get_last_lr()[0]))
            running, logged = 0.0, 0
            bar.set_postfix(loss=f"{run.history.train[-1]['loss']:.3f}", refresh=False)
        if evaluating:
            tic = time.perf_counter()
            elapsed = tic - start - eval_seconds  # training time so far; evaluation time is not training time
            run.history.val.append(dict(step=run.step, seconds=round(elapsed, 2), **evaluate(run)))
            eval_seconds += time.perf_counter() - tic
        bar.update(1)
    bar.close()
    run.history.seconds = time.perf_counter() - start - eval_seconds
    return run.history


def _start(model, batches, cfg: TrainConfig, resume: dict | None):
    """What :func:`train` runs with: the :class:`Run` (optimizer, schedule, scaler; restored from
    ``resume``), the module the loss function calls (DDP- and compile-wrapped as asked), the DDP
    wrapper or None, and this process's stream of batches (from where a resumed run stopped)."""
    device = device_of(model)
    rank, size = world()
    torch.manual_seed(cfg.seed + rank)  # dropout: each process its own masks
    model.train()
    optimizer = optimizer_for(model, cfg)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))
    run = Run(model, optimizer, schedule, History(), scaler=grad_scaler(device, cfg.precision))
    run.history.setup = dict(precision=resolve_precision(device, cfg.precision), compile=cfg.compile,
                             fused_adamw=bool(optimizer.defaults.get("fused")), processes=size)
    if size > 1:
        batches = itertools.islice(batches, rank, None, size)
    if resume is not None:
        run.load_state_dict(resume)
        for _ in range(run.step * cfg.accumulate):  # the same stream of batches, from where it stopped
            next(batches)
    ddp = None
    if size > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    net = ddp or model  # what the loss function calls
    if cfg.compile:
        net = torch.compile(net)
    return run, net, ddp, batches


def _update(run: Run, net, ddp, loss_fn, batches, cfg: TrainConfig, autocast, running):
    """One optimizer update of ``cfg.accumulate`` micro-batches; returns ``running`` plus their losses."""
    device, size = device_of(run.model), world()[1]
    for i in range(cfg.accumulate):
        batch = to_device(next(batches), device)
        run.history.tokens += _count_tokens(batch) * size
        # DDP averages gradients across processes once per update, after the last micro-batch
        sync = ddp.no_sync() if ddp is not None and i < cfg.accumulate - 1 else contextlib.nullcontext()
        with sync:
            with autocast:
                loss, _ = _split(loss_fn(net, batch))
            run.scaler.scale(loss / cfg.accumulate).backward()
        running += loss.detach()
    if cfg.grad_clip:
        run.scaler.unscale_(run.optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_([p for p in run.model.parameters() if p.requires_grad], cfg.grad_clip)
    run.scaler.step(run.optimizer)  # skipped by fp16's scaler when a gradient overflowed
    run.scaler.update()
    run.schedule.step()
    run.optimizer.zero_grad(set_to_none=True)
    return running
