"""What a pretraining run costs: training FLOPs per token, a recipe's tokens and FLOPs, a device's peak.

Chapters 4 and 5 compare the two objectives at equal compute with these, and ``bertgpt bench``
reports model FLOPs utilisation against :func:`peak_tflops`::

    pretraining_compute(ck.config, ck.info["train"], step=400)   # {"tokens": ..., "flops": ...}
"""

from __future__ import annotations

import dataclasses
import time

import torch

from .model import build, count_parameters

# Dense bf16/fp16 tensor-core peaks in TFLOP/s from the vendors' data sheets (SXM parts where there
# are two), matched against the CUDA device's name in this order.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "V100": 125.0,
               "T4": 65.0}


def flops_per_token(cfg) -> float:
    """Training FLOPs per token: 6·N for the weight matrices (N: every parameter but a learned
    position table, which is looked up, not multiplied; the token table is the tied output layer's
    matrix) plus, for a Transformer, 12·L·T·d for the attention scores and their weighted sum (PaLM,
    appendix B). Rotary positions and an LSTM have no position table; an LSTM has no attention.
    BERT's output layer runs only on the masked positions, so for BERT this counts more than is done."""
    with torch.device("meta"):
        n = count_parameters(build(cfg))
    if cfg.arch == "lstm":
        return 6 * n
    table = cfg.context * cfg.d_model if cfg.positions == "learned" else 0
    return 6 * (n - table) + 12 * cfg.n_layer * cfg.context * cfg.d_model


def pretraining_compute(cfg, train: dict, step: int | None = None) -> dict:
    """Tokens read and training FLOPs (:func:`flops_per_token` at each update's sequence length) of
    the first ``step`` updates (default: all) of the pretraining recipe ``train``, a checkpoint's
    ``info["train"]``. BERT's schedule is followed: the first ``short_fraction`` of the updates read
    sequences of ``short_length`` tokens, the rest the full context. Padding counts as read, as in
    the training history's ``tokens``. Returns ``dict(tokens=..., flops=...)``."""
    steps = train["steps"] if step is None else step
    if not 0 <= steps <= train["steps"]:
        raise ValueError(f"step must lie between 0 and the recipe's {train['steps']} updates, not {step}")
    per_update = train["batch_size"] * train.get("accumulate", 1)  # sequences
    n_short = min(steps, round(train.get("short_fraction", 0.0) * train["steps"]))
    short = min(train.get("short_length", cfg.context), cfg.context)
    tokens = flops = 0
    for n, length in ((n_short, short), (steps - n_short, cfg.context)):
        at_length = dataclasses.replace(cfg, context=length)
        tokens += n * per_update * length
        flops += n * per_update * length * flops_per_token(at_length)
    return dict(tokens=tokens, flops=flops)


def peak_tflops(device: torch.device, precision: str) -> tuple[float | None, str]:
    """(peak TFLOP/s, where it comes from): the table for a known GPU, a timed matmul on the CPU."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, peak in PEAK_TFLOPS.items():
            if key in name:
                return peak, f"table: {key} dense bf16/fp16"
        return None, f"unknown GPU {name!r}: not in the table"
    if device.type != "cpu":
        return None, f"no peak known for {device.type}"
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    a @ b
    n, tic = 0, time.perf_counter()
    while time.perf_counter() - tic < 0.5:
        a @ b
        n += 1
    return 2 * 1024**3 * n / (time.perf_counter() - tic) / 1e12, f"measured: {dtype} 1024x1024 matmul"
