"""The command line: ``python -m bertgpt COMMAND ...``. Each command prints one JSON object last.

    python -m bertgpt pretrain --model gpt --preset mini --steps 1200 --out runs/gpt-mini
    python -m bertgpt pretrain --resume runs/gpt-mini          # continue an interrupted run
    python -m bertgpt pretrain --init gpt-mini --corpus my_texts/ --steps 300 --out runs/gpt-mine
    python -m bertgpt bench --model gpt --preset mini --steps 20 --set vocab_size=100
    python -m bertgpt bench --model gpt --preset small --set precision=fp16 --set compile=true
    python -m bertgpt generate --checkpoint gpt-mini --prompt "the state of the union" --max-new-tokens 30
    python -m bertgpt fill --checkpoint bert-mini --text "the state of the [MASK] is strong"
    python -m bertgpt finetune --checkpoint gpt-mini --task era --examples 300 --set epochs=4 --out runs/gpt
    python -m bertgpt finetune --checkpoint bert-mini --task era --examples 300 --from-scratch --out runs/b0
    python -m bertgpt probe --checkpoint bert-mini --task era
    python -m bertgpt pretrain --recipe bert-mini --out runs/bert-mini   # retrain a course model
    python -m bertgpt card bert-mini                                     # its recipe, provenance, figures
    python -m bertgpt evaluate --checkpoint bert-mini                    # held-out figures, as JSON
    python -m bertgpt export-onnx bert-mini --out bert-mini.onnx         # for onnxruntime (the book's widget)

A course model's name (gpt-mini, bert-mini) given to ``--checkpoint`` means the weights that ship
with the package (``bertgpt.registry.COURSE``), lstm-mini among them.

Several processes (DistributedDataParallel; each process trains on its own share of the batches,
only rank 0 writes and prints; ``--resume`` works the same way)::

    torchrun --nproc_per_node=4 -m bertgpt pretrain --model gpt --preset small --out runs/gpt-small
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d \
        --rdzv_endpoint=HOST:29500 -m bertgpt pretrain --model gpt --preset small --out runs/gpt-small
    (the same on the second machine with --node_rank=1; HOST is the first machine's address)

This is one of the two places (with :func:`bertgpt.hub.pretrained`) where a name such as
``gpt-mini`` becomes a checkpoint; a checkpoint given as a directory is loaded from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
import time

import torch

from . import config
from .checkpoint import Checkpoint, CheckpointError, load
from .compute import flops_per_token, peak_tflops
from .config import FAMILIES, PRESETS, FinetuneConfig, apply_overrides
from .corpus import CORPORA, load_corpus
from .device import (
    barrier,
    default_device,
    finish_distributed,
    init_distributed,
    is_main,
    resolve_precision,
    world,
)
from .export import OPSET, OUTPUTS, export_onnx
from .finetune import finetune, save_classifier
from .generate import Sampling, fill_mask, generate
from .heldout import heldout_metrics
from .hub import card, pretrained, share_tokenizer, untrained
from .inputs import IGNORE, Batch
from .model import build, count_parameters
from .objectives import clm_loss, mlm_nsp_loss
from .pretraining import (
    continuation_config,
    continue_pretraining,
    prepare,
    pretraining_run,
    save_run,
)
from .probes import POOLS, probe
from .registry import COURSE, DEFAULT_TOKENIZER, NAMES, family_of, pretrained_configs, recipe_tokenizer
from .tasks import TASKS, load_task
from .tokenizer import KINDS
from .trainer import train


def _checkpoint(args, family: str | None = None, from_scratch: bool = False, name=None) -> Checkpoint:
    """``--checkpoint`` (or ``name``): a pretrained name (trained now if not cached) or a checkpoint
    directory.

    A from-scratch baseline needs only the architecture and the tokenizer: a name then gives
    :func:`~bertgpt.hub.untrained`, which never pretrains.
    """
    name, device = str(name or args.checkpoint), getattr(args, "device", None) or "cpu"
    if name in NAMES and family is not None and family_of(name) != family:
        raise CheckpointError(f"{name!r} is a {family_of(name)} model, but a {family} model is "
                              f"needed here: give a {family} checkpoint, e.g. {family}-mini")
    if name in NAMES:
        ck = untrained(name) if from_scratch else pretrained(name, device=device)
        return dataclasses.replace(ck, model=ck.model.to(device))
    return load(name, family=family, device=device)


# Fields of the model alone (dropout is also the training run's): fixed by a checkpoint given to --init.
MODEL_FIELDS = ({f.name for f in dataclasses.fields(config.ModelConfig)}
                - {f.name for f in dataclasses.fields(config.PretrainConfig)})


def _configs(args):
    if getattr(args, "recipe", None):
        if args.model or args.preset or args.set or args.steps is not None:
            raise ValueError("--recipe fixes the model and its training: give it without --model, "
                             "--preset, --steps or --set")
        return pretrained_configs(args.recipe, seed=args.seed, course=True)
    if not args.model:
        raise ValueError(f"{args.command} needs --model gpt or --model bert")
    preset = args.preset or "mini"
    cfg = config.model_config(preset, args.model)
    tcfg = config.train_config(preset, args.model, seed=args.seed)
    cfg, tcfg = apply_overrides(args.set, cfg, tcfg)
    if args.steps is not None:
        tcfg = dataclasses.replace(tcfg, steps=args.steps, eval_every=min(tcfg.eval_every, args.steps))
    return cfg, tcfg


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=FAMILIES, help="gpt (causal LM) or bert (MLM + NSP)")
    p.add_argument("--preset", choices=PRESETS, help="the model's size (default: mini)")
    p.add_argument("--steps", type=int, help="optimizer updates (default: the preset's)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a model or training field, e.g. n_layer=4 (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the best available)")


def cmd_pretrain(args) -> dict | None:
    """Pretrain (or resume) and save; under torchrun, in every process, and rank 0 reports."""
    device = init_distributed(args.device) or args.device
    try:
        return _pretrain(args, device)
    finally:
        finish_distributed()


def _pretrain(args, device) -> dict | None:
    corpus = load_corpus(args.corpus)
    if args.init:
        if args.resume:
            raise ValueError("give --init (a new run from a pretrained checkpoint) or --resume (an "
                             "interrupted run), not both")
        out = _out(args)
        model, tok, history, train_info = _continue(args, corpus, device)
        if not is_main():
            return None
        record = save_run(out, model, tok, history, corpus, train_info, init=str(args.init))
        return dict(**record.metrics, **history.setup, init=str(args.init), checkpoint=str(out))
    if args.resume:  # the recipe is the interrupted run's own
        out, cfg, tcfg, tokenizer = args.resume, None, None, None
    else:
        out, (cfg, tcfg) = _out(args), _configs(args)
        recipe = getattr(args, "recipe", None)
        tokenizer = recipe_tokenizer(recipe, args.tokenizer) if recipe else args.tokenizer
        share_tokenizer(corpus, cfg, tokenizer)  # on the addresses, the course models' token ids
        if world()[1] > 1:  # one process per machine trains the tokenizer into its cache; the rest load it
            if int(os.environ.get("LOCAL_RANK", 0)) == 0:
                prepare(corpus, cfg, tokenizer)
            barrier()
    recipe = COURSE.get(getattr(args, "recipe", None), {})
    width = recipe.get("width") if recipe.get("objective") == "rtd" else None  # ELECTRA's run
    ck, history = pretraining_run(corpus, cfg, tcfg, out, tokenizer=tokenizer, device=device, width=width)
    if not is_main():
        return None
    return dict(**ck.info["metrics"], **history.setup, checkpoint=str(out))


def _out(args) -> str:
    if not args.out:
        raise ValueError("pretrain needs --out DIR (or --resume DIR to continue an interrupted run)")
    return args.out


def _continue(args, corpus, device):
    """``pretrain --init``: the checkpoint's model, tokenizer and recipe, trained on ``corpus``.

    Options that would build another model contradict the checkpoint and are refused by name, before
    anything is loaded (or, for a name not yet cached, pretrained); a ``--model`` of the other family
    is refused as ``--checkpoint`` refuses one. Returns ``(model, tokenizer, history, training config
    as a dict)``.
    """
    fixed = [f"--{o}" for o in ("preset", "tokenizer") if getattr(args, o)]
    fixed += [f"--set {item}" for item in args.set if item.partition("=")[0] in MODEL_FIELDS]
    if fixed:
        raise ValueError(f"{', '.join(fixed)}: with --init the model and its tokenizer are the "
                         "checkpoint's; only training fields (--steps, --set lr=...) can change")
    ck = _checkpoint(args, family=args.model, name=args.init)
    (tcfg,) = apply_overrides(args.set, continuation_config(ck, args.steps or 300, seed=args.seed))
    reference = load_corpus(ck.info["corpus"]) if ck.info.get("corpus") in CORPORA else None
    model, tok, history = continue_pretraining(ck, corpus, tcfg, reference=reference, device=device,
                                               out=args.out)
    return model, tok, history, dataclasses.asdict(tcfg)


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux: the process's peak


def cmd_bench(args) -> dict:
    """Train on random tokens for a few steps and time it: the model's speed, free of data costs, and
    its model-FLOP utilisation (the share of the device's peak that the model's arithmetic uses)."""
    cfg, tcfg = _configs(args)
    device = torch.device(args.device or default_device())
    torch.manual_seed(args.seed)
    model = build(cfg).to(device)
    B, T, g = tcfg.batch_size, cfg.context, torch.Generator().manual_seed(args.seed)

    def batches():
        while True:
            ids = torch.randint(8, cfg.vocab_size, (B, T + 1), generator=g)
            if cfg.causal:
                yield ids[:, :-1], ids[:, 1:]
            else:
                ids = ids[:, :-1]
                chosen = torch.rand(B, T, generator=g) < config.PretrainConfig.val_mask_rate
                labels = torch.where(chosen, ids, IGNORE)
                yield Batch(input_ids=ids, segments=torch.zeros_like(ids), pad_mask=torch.ones_like(ids),
                            labels=labels, is_next=torch.randint(2, (B,), generator=g))

    loss_fn = clm_loss if cfg.causal else mlm_nsp_loss
    warm = dataclasses.replace(tcfg, steps=2, warmup=1)
    train(model, loss_fn, batches(), warm, progress=False)  # allocations, kernels (and compiling)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    tic = time.perf_counter()
    history = train(model, loss_fn, batches(), tcfg, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - tic
    tokens_per_second = history.tokens / seconds
    achieved = flops_per_token(cfg) * tokens_per_second / 1e12
    peak, peak_source = peak_tflops(device, resolve_precision(device, tcfg.precision))
    return dict(tokens_per_second=round(tokens_per_second, 1),
                ms_per_step=round(1000 * seconds / tcfg.steps, 2), model_tflops=round(achieved, 4),
                mfu=round(achieved / peak, 4) if peak else None,
                peak_tflops=round(peak, 3) if peak else None, peak_source=peak_source,
                final_loss=history.train[-1]["loss"],
                peak_memory_mb=round(_peak_memory_mb(device), 1), device=str(device),
                params=count_parameters(model), n_layer=cfg.n_layer, n_head=cfg.n_head,
                d_model=cfg.d_model, context=cfg.context, vocab_size=cfg.vocab_size,
                batch_size=B, accumulate=tcfg.accumulate, steps=tcfg.steps, family=cfg.default_family,
                **history.setup)


def cmd_generate(args) -> dict:
    """Continue a prompt with a GPT checkpoint."""
    ck = _checkpoint(args, "gpt")
    prompt_tokens = len(ck.tokenizer.encode(args.prompt))
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.greedy)
    text = generate(ck.model, ck.tokenizer, args.prompt, args.max_new_tokens, sampling, args.seed)
    return dict(text=text, prompt=args.prompt, prompt_tokens=prompt_tokens, new_tokens=args.max_new_tokens,
                truncated=prompt_tokens > ck.config.context)


def cmd_fill(args) -> dict:
    """Predict each [MASK] of a text with a BERT checkpoint."""
    ck = _checkpoint(args, "bert")
    masks = fill_mask(ck.model, ck.tokenizer, args.text, args.top_k)
    return dict(text=args.text, masks=[[dict(token=t, probability=round(p, 6)) for t, p in candidates]
                                       for candidates in masks])


def _task(args):
    task = load_task(args.task)
    return task.subsample(args.examples, seed=args.seed) if args.examples else task


def cmd_finetune(args) -> dict:
    """Fine-tune a checkpoint on a task, report its accuracies and save the classifier."""
    (cfg,) = apply_overrides(args.set, FinetuneConfig(seed=args.seed))
    ck = _checkpoint(args, from_scratch=args.from_scratch)
    classifier, result = finetune(ck, _task(args), cfg, from_scratch=args.from_scratch, device=args.device,
                                  progress=True)
    save_classifier(args.out, classifier.cpu(), source=str(args.checkpoint), finetune=dataclasses.asdict(cfg),
                    metrics=result)
    return dict(**result, checkpoint=str(args.out))


def cmd_probe(args) -> dict:
    """Linear-probe accuracy of every layer of a frozen checkpoint on a task."""
    return probe(_checkpoint(args), load_task(args.task), max_examples=args.examples, pool=args.pool,
                 seed=args.seed)


def cmd_card(args) -> dict:
    """Print a course model's card; return what identifies it."""
    info = card(args.name)
    print(render_card(info))
    return dict(name=info["name"], weights_sha256=info["provenance"]["weights_sha256"])


def render_card(info: dict) -> str:
    """A model card as text: what it is, how it was trained, what it scores, how to retrain it."""
    lines = [f"# {info['name']}: {info['summary']}", ""]
    lines += [f"- {key}: {value}" for key, value in info["provenance"].items()]
    lines += ["", "Held-out figures (test addresses, never seen in pretraining):"]
    lines += [f"- {key}: {value}" for key, value in info["metrics"].items()]
    lines += ["", f"Departures from the paper: {info['departures']}"]
    for part in ("model", "train"):  # dropout is in both: the model's, and the rate while pretraining
        lines += ["", f"Recipe, {part}:"]
        lines += [f"- {key}: {value}" for key, value in info["recipe"][part].items()]
    curve = info["loss_curve"]
    marks = [curve[min(len(curve) - 1, round(i * (len(curve) - 1) / 8))] for i in range(9)]
    lines += ["", "Training loss (update: loss): " + ", ".join(f"{s}: {loss:.3f}" for s, loss in marks)]
    lines += ["", f"Retrain: {info['retrain']}"]
    return "\n".join(lines)


def cmd_evaluate(args) -> dict:
    """Held-out figures of a checkpoint on the test addresses (bertgpt.heldout)."""
    ck = _checkpoint(args)
    return dict(checkpoint=str(args.checkpoint), family=ck.model.family, **heldout_metrics(ck))


def cmd_export_onnx(args) -> dict:
    """Write a course model (or a checkpoint directory) as one ONNX file: logits and attention weights."""
    name = str(args.name)
    if name not in COURSE and not os.path.isdir(name):
        raise ValueError(f"unknown model {name!r}: give one of the course models ({', '.join(COURSE)}) "
                         "or a checkpoint directory")
    ck = pretrained(name, device="cpu") if name in COURSE else load(name)
    label = os.path.basename(os.path.normpath(name))
    try:
        path = export_onnx(ck, args.out or f"{label}.onnx", name=label)
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    return dict(name=label, path=str(path), bytes=path.stat().st_size, inputs=["ids"], outputs=list(OUTPUTS),
                opset=OPSET, context=ck.config.context)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bertgpt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _training_commands(sub)
    _model_commands(sub)
    return parser


def _checkpoint_argument(p) -> None:
    p.add_argument("--checkpoint", required=True, help=f"a checkpoint directory or one of {', '.join(NAMES)}")


def _training_commands(sub) -> None:
    p = sub.add_parser("pretrain", help="pretrain a GPT or BERT and save a checkpoint")
    _common(p)
    p.add_argument("--out", help="checkpoint directory to write (saved at every evaluation, to resume)")
    p.add_argument("--resume", metavar="DIR", help="continue the interrupted run saved in DIR")
    p.add_argument("--recipe", choices=tuple(COURSE),
                   help="the exact recipe of a shipped course model (its card says how long it takes)")
    p.add_argument("--init", metavar="NAME_OR_DIR",
                   help=f"start from this pretrained model ({', '.join(NAMES)}, or a checkpoint directory) "
                   "and keep training it on --corpus, with its tokenizer (default: 300 steps)")
    p.add_argument("--corpus", default="sotu",
                   help=f"{' or '.join(map(repr, CORPORA))}, a folder of .txt files, or a text file")
    p.add_argument("--tokenizer", choices=KINDS,
                   help=f"default: {DEFAULT_TOKENIZER['gpt']} for gpt, {DEFAULT_TOKENIZER['bert']} for bert")
    p.set_defaults(run=cmd_pretrain)
    p = sub.add_parser("bench", help="measure training speed on random tokens")
    _common(p)
    p.set_defaults(run=cmd_bench, steps=20)
    p = sub.add_parser("finetune", help="fine-tune a GPT or BERT on a task and save the classifier")
    _checkpoint_argument(p)
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}, or a CSV (text, label)")
    p.add_argument("--out", required=True, help="directory to write the fine-tuned classifier to")
    p.add_argument("--examples", type=int, help="train on this many examples (stratified; default: all)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a fine-tuning field, e.g. epochs=4 or lr=1e-4 (repeatable); fields: "
                   + ", ".join(f.name for f in dataclasses.fields(FinetuneConfig)))
    p.add_argument("--from-scratch", action="store_true",
                   help="same architecture and tokenizer, random initialisation (never pretrains)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    p.set_defaults(run=cmd_finetune)


def _model_commands(sub) -> None:
    p = sub.add_parser("generate", help="continue a prompt with a GPT")
    _checkpoint_argument(p)
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
    _checkpoint_argument(p)
    p.add_argument("--text", required=True, help='text holding one or more [MASK], e.g. "the [MASK] is"')
    p.add_argument("--top-k", type=int, default=5, help="candidates per mask")
    p.set_defaults(run=cmd_fill)
    p = sub.add_parser("probe", help="linear-probe accuracy of each layer of a frozen model on a task")
    _checkpoint_argument(p)
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}, or a CSV (text, label)")
    p.add_argument("--examples", type=int, default=1000, help="training examples for the probes")
    p.add_argument("--pool", choices=POOLS, default="mean",
                   help="mean over tokens, or the family's summary token (GPT: last, BERT: [CLS])")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="cuda, mps or cpu (default: the CPU)")
    p.set_defaults(run=cmd_probe)
    p = sub.add_parser("card", help="print the model card of a shipped course model")
    p.add_argument("name", choices=tuple(COURSE))
    p.set_defaults(run=cmd_card)
    p = sub.add_parser("evaluate", help="held-out figures of a GPT or BERT on the test addresses, as JSON")
    _checkpoint_argument(p)
    p.add_argument("--device", help="cuda, mps or cpu (default: the CPU)")
    p.set_defaults(run=cmd_evaluate)
    p = sub.add_parser("export-onnx", help="write a course model as an ONNX file (logits, attention)")
    p.add_argument("name", help=f"one of the course models ({', '.join(COURSE)}) or a checkpoint directory")
    p.add_argument("--out", help="the ONNX file to write (default: NAME.onnx)")
    p.set_defaults(run=cmd_export_onnx)


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    if result is not None:  # None: a torchrun process other than rank 0
        print(json.dumps(result))
