"""The command line: ``python -m bertgpt COMMAND ...``. Each command prints one JSON object last.

    python -m bertgpt pretrain --model gpt --preset mini --steps 1200 --out runs/gpt-mini
    python -m bertgpt bench --model gpt --preset mini --steps 20 --set vocab_size=100
    python -m bertgpt generate --checkpoint gpt-mini --prompt "the state of the union" --max-new-tokens 30
    python -m bertgpt fill --checkpoint bert-mini --text "the state of the [MASK] is strong"
    python -m bertgpt finetune --checkpoint gpt-mini --task era --examples 300 --out runs/gpt-era
    python -m bertgpt probe --checkpoint bert-mini --task era
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import resource
import sys
import time

import torch

from .checkpoint import CheckpointError, save
from .config import FAMILIES, PRESETS, apply_overrides, model_config, train_config
from .corpus import load_corpus
from .finetune import finetune, save_classifier
from .generate import fill_mask, generate
from .hub import NAMES, resolve
from .model import build, count_parameters
from .pretraining import DEFAULT_TOKENIZER, clm_loss, mlm_nsp_loss, pretrain, summary
from .probes import POOLS, probe
from .tasks import TASKS, load_task
from .tokenizer import KINDS
from .trainer import default_device, train


def _configs(args):
    cfg = model_config(args.preset, args.model)
    tcfg = train_config(args.preset, args.model, seed=args.seed)
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


def cmd_generate(args) -> dict:
    """Continue a prompt with a GPT checkpoint."""
    ck = resolve(args.checkpoint, "gpt")
    prompt_tokens = len(ck.tokenizer.encode(args.prompt))
    text = generate(ck.model, ck.tokenizer, args.prompt, args.max_new_tokens, args.temperature, args.top_k,
                    args.top_p, args.repetition_penalty, args.seed, greedy=args.greedy)
    return dict(text=text, prompt=args.prompt, prompt_tokens=prompt_tokens, new_tokens=args.max_new_tokens,
                truncated=prompt_tokens > ck.config.context)


def cmd_fill(args) -> dict:
    """Predict each [MASK] of a text with a BERT checkpoint."""
    ck = resolve(args.checkpoint, "bert")
    masks = fill_mask(ck.model, ck.tokenizer, args.text, args.top_k)
    return dict(text=args.text, masks=[[dict(token=t, probability=round(p, 6)) for t, p in candidates]
                                       for candidates in masks])


_FINETUNE = {k: p.default for k, p in inspect.signature(finetune).parameters.items()}  # one set of defaults


def _task(args):
    task = load_task(args.task)
    return task.subsample(args.examples, seed=args.seed) if args.examples else task


def cmd_finetune(args) -> dict:
    """Fine-tune a checkpoint on a task, report its accuracies and save the classifier."""
    ck = resolve(args.checkpoint, device=args.device)
    classifier, result = finetune(ck, _task(args), epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                                  lm_coef=args.lm_coef, freeze=args.freeze, from_scratch=args.from_scratch,
                                  seed=args.seed, device=args.device, patience=args.patience,
                                  restarts=args.restarts)
    save_classifier(args.out, classifier.cpu(), source=str(args.checkpoint), metrics=result)
    return dict(**result, checkpoint=str(args.out))


def cmd_probe(args) -> dict:
    """Linear-probe accuracy of every layer of a frozen checkpoint on a task."""
    return probe(args.checkpoint, load_task(args.task), max_examples=args.examples, pool=args.pool,
                 seed=args.seed, device=args.device)


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
    p = sub.add_parser("generate", help="continue a prompt with a GPT")
    p.add_argument("--checkpoint", required=True, help=f"a checkpoint directory or one of {', '.join(NAMES)}")
    p.add_argument("--prompt", default="", help="text to continue (empty: start a new document)")
    p.add_argument("--max-new-tokens", type=int, default=50)
    p.add_argument("--temperature", type=float, default=1.0, help="0 means greedy")
    p.add_argument("--top-k", type=int, help="sample among the k most probable tokens")
    p.add_argument("--top-p", type=float, help="sample among the most probable tokens holding mass p")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="CTRL's penalty; 1 means none")
    p.add_argument("--greedy", action="store_true", help="always take the most probable token")
    p.add_argument("--seed", type=int, help="repeat a sample exactly")
    p.set_defaults(run=cmd_generate)
    p = sub.add_parser("fill", help="predict the [MASK] tokens of a text with a BERT")
    p.add_argument("--checkpoint", required=True, help=f"a checkpoint directory or one of {', '.join(NAMES)}")
    p.add_argument("--text", required=True, help='text holding one or more [MASK], e.g. "the [MASK] is"')
    p.add_argument("--top-k", type=int, default=5, help="candidates per mask")
    p.set_defaults(run=cmd_fill)
    p = sub.add_parser("finetune", help="fine-tune a GPT or BERT on a task and save the classifier")
    p.add_argument("--checkpoint", required=True, help=f"a checkpoint directory or one of {', '.join(NAMES)}")
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}, or a CSV (text, label)")
    p.add_argument("--out", required=True, help="directory to write the fine-tuned classifier to")
    p.add_argument("--examples", type=int, help="train on this many examples (stratified; default: all)")
    p.add_argument("--lm-coef", type=float, default=_FINETUNE["lm_coef"],
                   help="GPT's λ of the auxiliary LM loss; 0: none")
    p.add_argument("--freeze", type=int, default=0, help="keep the embeddings and the lower K blocks fixed")
    p.add_argument("--epochs", type=int, default=_FINETUNE["epochs"])
    p.add_argument("--lr", type=float, default=_FINETUNE["lr"], help="peak learning rate")
    p.add_argument("--batch-size", type=int, default=_FINETUNE["batch_size"])
    p.add_argument("--patience", type=int, default=_FINETUNE["patience"],
                   help="stop after this many epochs without a better validation accuracy")
    p.add_argument("--from-scratch", action="store_true", help="same architecture, random initialisation")
    p.add_argument("--restarts", type=int, default=_FINETUNE["restarts"],
                   help="runs with other fine-tuning seeds; the best on validation is kept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    p.set_defaults(run=cmd_finetune)
    p = sub.add_parser("probe", help="linear-probe accuracy of each layer of a frozen model on a task")
    p.add_argument("--checkpoint", required=True, help=f"a checkpoint directory or one of {', '.join(NAMES)}")
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}, or a CSV (text, label)")
    p.add_argument("--examples", type=int, default=1000, help="training examples for the probes")
    p.add_argument("--pool", choices=POOLS, default="mean",
                   help="mean over tokens, or the family's summary token (GPT: last, BERT: [CLS])")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    p.set_defaults(run=cmd_probe)
    return parser


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result))
