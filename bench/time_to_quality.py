"""Time to quality: both minis from an empty cache, and when each reached its validation target.

    python bench/time_to_quality.py              # side by side, one thread each (as CI trains them)
    python bench/time_to_quality.py --mode seq   # one after the other, every core each
    python bench/time_to_quality.py --set bert-mini:positions=rotary   # a variant (FIELD=VALUE)

Each model is trained by `bertgpt.pretrained()` in a process of its own, into a fresh cache, so the
wall time includes loading the corpus and training the tokenizer. From each run's validation history
it reports the first evaluation that met the target (gpt-mini: loss <= 4.85 nats/token; bert-mini:
MLM accuracy >= 20% and NSP accuracy >= 80%), the tokens seen by then, and the model-FLOP utilisation
of the run against this machine's matmul peak, timed in the same run. It prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import bertgpt
from bertgpt.compute import flops_per_token, peak_tflops
from bertgpt.config import apply_overrides
from bertgpt.trainer import resolve_precision

TARGETS = {"gpt-mini": {"loss": ("<=", 4.85)},
           "bert-mini": {"mlm_accuracy": (">=", 0.20), "nsp_accuracy": (">=", 0.80)}}
TRAIN = ("import bertgpt, json, sys\n"
         "bertgpt.pretrained(sys.argv[1], progress=False, changes=json.loads(sys.argv[2]))")


def met(metrics: dict, target: dict) -> bool:
    return all(metrics[k] <= v if op == "<=" else metrics[k] >= v for k, (op, v) in target.items())


def tokens_by(step: int, tcfg, cfg) -> int:
    """Tokens in the first ``step`` updates (BERT's short updates are shorter)."""
    short = min(step, round(tcfg.short_fraction * tcfg.steps)) if cfg.default_family == "bert" else 0
    per_update = tcfg.batch_size * tcfg.accumulate
    return per_update * (short * min(tcfg.short_length, cfg.context) + (step - short) * cfg.context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("par", "seq"), default="par")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:FIELD=VALUE",
                        help="train a variant of one mini, as `pretrain --set` does; repeatable")
    args = parser.parse_args()
    changes = {name: {} for name in TARGETS}
    for item in args.set:
        name, _, assignment = item.partition(":")
        if name not in TARGETS or "=" not in assignment:
            raise SystemExit(f"--set {item!r}: write NAME:FIELD=VALUE with NAME one of {', '.join(TARGETS)}")
        cfgs = bertgpt.hub.pretrained_configs(name)
        new = apply_overrides([assignment], *cfgs)
        changes[name].update({k: v for old, cfg in zip(cfgs, new) for k, v in dataclasses.asdict(cfg).items()
                              if getattr(old, k) != v})
    cache = tempfile.mkdtemp(prefix="bertgpt-ttq-")
    env = {**os.environ, "BERTGPT_CACHE": cache, "BERTGPT_QUIET": "1"}
    if args.mode == "par":
        env["BERTGPT_THREADS"] = "1"
    tic, seconds = time.perf_counter(), {}
    runs = {}
    for name in TARGETS:
        command = [sys.executable, "-c", TRAIN, name, json.dumps(changes[name])]
        runs[name] = (subprocess.Popen(command, env=env), time.perf_counter())
        if args.mode == "seq":
            runs[name][0].wait()
            seconds[name] = round(time.perf_counter() - runs[name][1], 1)
    for name, (proc, start) in runs.items():
        if proc.wait():
            raise SystemExit(f"training {name} failed")
        seconds.setdefault(name, round(time.perf_counter() - start, 1))
    total = round(time.perf_counter() - tic, 1)

    os.environ["BERTGPT_CACHE"] = cache
    device = torch.device("cpu")
    peak, source = peak_tflops(device, resolve_precision(device))
    report = dict(mode=args.mode, changes=changes, total_seconds=total, cpu_peak_tflops=round(peak, 3),
                  peak_source=source)
    for name, target in TARGETS.items():
        ck = bertgpt.pretrained(name, changes=changes[name])  # loads what the process above wrote
        _, tcfg = bertgpt.hub.pretrained_configs(name, changes=changes[name])
        cfg = ck.config
        history, metrics = ck.info["history"], ck.info["metrics"]
        reached = next((e for e in history["val"] if met(e, target)), None)
        achieved = flops_per_token(cfg) * metrics["tokens_per_second"] / 1e12
        report[name] = dict(
            wall_seconds=seconds[name], train_seconds=metrics["seconds"], final=history["val"][-1],
            target=target, reached_at_update=reached and reached["step"],
            tokens_to_target=reached and tokens_by(reached["step"], tcfg, cfg),
            tokens_per_second=metrics["tokens_per_second"], model_tflops=round(achieved, 4),
            mfu=round(achieved / peak, 4))
    print(json.dumps(report, indent=2, default=float))


if __name__ == "__main__":
    main()
