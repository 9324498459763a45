"""Why gpt-mini fine-tunes below its own zero-shot: a controlled study of the fine-tuning recipe.

Each arm changes one thing of the recipe (``FinetuneConfig``'s defaults, the "default" arm) and is
fine-tuned with seeds 0, 1, 2 on the same ``--examples`` labelled examples of each task, scored on
``--val`` validation examples only. The arms (``ARMS``) are the issue's suspects:

- the learning rate (the default was chosen on minis pretrained for 850 updates, not 12,000);
- the auxiliary LM loss (λ = 0 against 0.5) and a longer run (more epochs, more patience);
- what the classifier reads: the state at ``[EXTRACT]``, a token pretraining never showed, or the
  average of every real token's state ("mean");
- the special tokens' embeddings, ``[START]``, ``[DELIM]`` and ``[EXTRACT]``, which GPT's pretraining
  never trained (it read paragraphs back to back and closed each address with ``[SEP]``): left as
  pretraining left them, or started from ``[SEP]``'s ("seeded");
- on a pair task, no new head at all: the language model's own gain, log p(B | A) - log p(B), cut
  where the training pairs split best, then fine-tuned ("gain", at three learning rates; the start
  is kept where no epoch beats it on validation).

Both families go through the same arms (BERT has no λ and no unseen tokens: those arms are GPT's).
The test split is touched once, at the end, for the default and the arm with the best mean
validation accuracy on each task, for each family, on ``--test`` test examples::

    python bench/finetune_study.py [--tasks next era genre] [--families gpt bert] [--threads 1]
    python bench/finetune_study.py --families gpt --tasks era --arms default --snapshot 800

``--snapshot STEP`` fine-tunes the course model after STEP updates instead of the finished one
(the finished gpt-mini against its 800-update snapshot on ``era`` is one of the issue's questions).

Prints one JSON line per run, then the table of mean validation accuracies and the test figures.
"""

import argparse
import copy
import dataclasses
import json
import statistics

import torch
from minis import load_minis

import bertgpt
from bertgpt.checkpoint import Checkpoint
from bertgpt.config import FinetuneConfig
from bertgpt.finetune import finetune
from bertgpt.tasks import load_task

ARMS = {
    "default": dict(readout="summary"),  # GPT-1's [EXTRACT] head, BERT's [CLS]: the recipe before the study
    "lr 3e-4": dict(lr=3e-4),
    "lr 1e-4": dict(lr=1e-4),
    "lambda 0": dict(lm_coef=0.0),
    "12 epochs": dict(epochs=12, patience=4),
    "mean": dict(readout="mean"),
    "seeded": dict(seeded=True),
    "mean, lr 3e-4": dict(readout="mean", lr=3e-4),
    "gain": dict(readout="gain"),  # the language model's own log p(B | A) - log p(B), pairs only
    "gain, lr 1e-4": dict(readout="gain", lr=1e-4),
    "gain, lr 1e-5": dict(readout="gain", lr=1e-5),
}
GPT_ONLY = ("lambda 0", "seeded", "gain", "gain, lr 1e-4", "gain, lr 1e-5")
PAIRS_ONLY = ("gain", "gain, lr 1e-4", "gain, lr 1e-5")


def seeded(ck: Checkpoint) -> Checkpoint:
    """A copy of GPT checkpoint ``ck`` whose ``[START]``, ``[DELIM]`` and ``[EXTRACT]`` embeddings start
    from ``[SEP]``'s, the one special token its pretraining read."""
    model = copy.deepcopy(ck.model)
    tok, table = ck.tokenizer, model.backbone.tok_emb.weight
    with torch.no_grad():
        for i in (tok.start_id, tok.delim_id, tok.extract_id):
            table[i] = table[tok.sep_id]
    return Checkpoint(model, tok, ck.info)


def run(ck, task, arm: dict, seed: int, examples: int):
    """One fine-tuning run of ``arm`` with ``seed``: (classifier, result)."""
    arm = dict(arm)
    if arm.pop("seeded", False):
        ck = seeded(ck)
    cfg = FinetuneConfig(seed=seed, **arm)
    return finetune(ck, task.subsample(examples, seed=seed), cfg, device="cpu", progress=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["next", "era", "genre"])
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--val", type=int, default=200)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--snapshot", type=int, help="fine-tune the course models after this many updates")
    args = parser.parse_args()
    corpus, checkpoints = load_minis(args.families, args.threads)
    if args.snapshot:
        checkpoints = {f: bertgpt.pretrained(f"{f}-mini", step=args.snapshot, progress=False)
                       for f in args.families}
    tasks = {name: load_task(name) if name == "genre" else load_task(name, corpus) for name in args.tasks}
    table = {}
    for family in args.families:
        for name, task in tasks.items():
            val_only = dataclasses.replace(task, val=task.val[:args.val], test=[])
            for arm in args.arms:
                if (family == "bert" and arm in GPT_ONLY) or (arm in PAIRS_ONLY and not task.train[0].text_b):
                    continue
                accs = []
                for seed in args.seeds:
                    _, r = run(checkpoints[family], val_only, ARMS[arm], seed, args.examples)
                    accs.append(r["val_accuracy"])
                    print(json.dumps(dict(family=family, task=name, arm=arm, seed=seed, step=args.snapshot,
                                          val_accuracy=r["val_accuracy"], best_epoch=r["best_epoch"],
                                          start=r.get("start_val_accuracy"),
                                          history=[h["val_accuracy"] for h in r["history"]],
                                          seconds=r["seconds"])), flush=True)
                table.setdefault(family, {}).setdefault(arm, {})[name] = round(statistics.mean(accs), 3)
    print(json.dumps(table, indent=1), flush=True)
    for family, arms in table.items():  # the test split, once: the default and each task's best arm
        for name, task in tasks.items():
            best = max((a for a in arms if name in arms[a]), key=lambda a: arms[a][name])
            test_only = dataclasses.replace(task, val=task.val[:args.val], test=task.test[:args.test])
            for arm in dict.fromkeys(("default", best)):
                accs = [run(checkpoints[family], test_only, ARMS[arm], s, args.examples)[1]["test_accuracy"]
                        for s in args.seeds]
                print(json.dumps(dict(family=family, arm=arm, task=name, test=accs, snapshot=args.snapshot,
                                      mean=round(statistics.mean(accs), 3),
                                      majority=task.majority_baseline())), flush=True)


if __name__ == "__main__":
    main()
