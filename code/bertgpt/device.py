"""The runtime, on the bottom floor: where a model runs, on how many threads, in which number format,
and in how many processes. Inference, scoring and training all need these, and none of them needs
the training loop::

    device = device_of(model)            # the device of its parameters
    with eval_mode(model): ...            # dropout off inside, the mode as it was after
    batch = to_device(batch, device)      # a tensor, or a dict/tuple/list of them
    with training_threads(): ...          # $BERTGPT_THREADS threads, else the idle cores
    resolve_precision("cpu")              # "bf16" where the CPU multiplies bf16 natively, else "fp32"
    rank, size = world()                  # (0, 1) unless torchrun started several processes
"""

from __future__ import annotations

import contextlib
import os
import time

import torch
import torch.distributed as dist

PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # TrainConfig.precision; resolve_precision decides "auto"


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


# --- Precision: the one place that decides the number format of the forward pass ------------------

# bf16 autocast on CPUs that multiply bf16 natively (AVX-512 BF16, AMX). Measured on one thread of a
# Xeon with AVX-512 BF16, GPT mini (4 layers, d=128, context 128) through this loop: 3,230 tokens/s
# in fp32 against 4,150 in bf16 at batch 16 (1.28x), 3,150 against 4,060 at batch 32 (1.29x),
# medians of 4 alternating rounds; after 300 updates on the addresses the validation loss was 5.264
# and 5.291 in fp32 (seeds 0, 1) and 5.262 and 5.296 in bf16, within the seeds' spread. So "auto" is
# bf16 on such CPUs; precision="fp32" keeps fp32 everywhere.


def cpu_has_bf16() -> bool:
    """Whether this CPU has native bf16 arithmetic (AVX-512 BF16 or AMX), the kind autocast can use."""
    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        if getattr(torch.cpu, check, lambda: False)():
            return True
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(device, choice: str = "auto") -> str:
    """The number format a run on ``device`` uses: "fp32", "bf16" or "fp16".

    "auto" is bf16 on CUDA GPUs with bf16 tensor cores (compute capability 8.0 and up: A100, H100,
    L4), fp16 with a gradient scaler on older ones (T4, V100), bf16 on CPUs that multiply bf16
    natively (:func:`cpu_has_bf16`), and fp32 elsewhere.
    """
    if choice not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {choice!r}")
    device = torch.device(device)
    if choice == "fp16" and device.type != "cuda":
        raise ValueError(f"precision 'fp16' (with a gradient scaler) needs a CUDA device, not {device.type}: "
                         "use bf16 or fp32")
    if choice != "auto":
        return choice
    if device.type == "cuda":
        return "bf16" if torch.cuda.get_device_capability(device) >= (8, 0) else "fp16"
    if device.type == "cpu" and cpu_has_bf16():
        return "bf16"
    return "fp32"


def precision(device, choice: str = "auto"):
    """The autocast context of a run on ``device`` (see :func:`resolve_precision`); fp32: none."""
    name = resolve_precision(device, choice)
    if name == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    return torch.autocast(torch.device(device).type, dtype=dtype)


def grad_scaler(device, choice: str = "auto"):
    """A gradient scaler, enabled for fp16 only (bf16 has fp32's range and needs none)."""
    enabled = resolve_precision(device, choice) == "fp16"
    if not hasattr(torch.amp, "GradScaler"):  # torch < 2.3 has only the CUDA one
        return torch.cuda.amp.GradScaler(enabled=enabled)
    return torch.amp.GradScaler(torch.device(device).type, enabled=enabled)


# --- Several processes: DistributedDataParallel under torchrun ------------------------------------

def world() -> tuple[int, int]:
    """(rank, number of processes): (0, 1) unless a process group is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main() -> bool:
    """True in the one process that writes checkpoints, logs and progress bars (rank 0)."""
    return world()[0] == 0


def init_distributed(device: str | None = None) -> str | None:
    """Join the process group that ``torchrun`` describes; return this process's device.

    torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; without
    them this does nothing and returns None. On CUDA each process takes GPU ``LOCAL_RANK`` and the
    group talks over NCCL; on the CPU (or with ``device="cpu"``) over gloo.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    cuda = torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return device or "cpu"


def barrier() -> None:
    """Wait for every process (nothing to wait for in a single one)."""
    if world()[1] > 1:
        dist.barrier()


def finish_distributed() -> None:
    """Leave the process group, if this process is in one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _gather(obj) -> list:
    out = [None] * world()[1]
    dist.all_gather_object(out, obj)
    return out
