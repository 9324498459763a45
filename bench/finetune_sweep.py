"""The fine-tuning defaults, chosen by measurement: learning rate and epochs on two tasks, 3 seeds.

Each pretrained mini model is fine-tuned on 300 labelled examples of ``era`` and ``next`` with every
combination of ``--lrs`` and ``--epochs`` (the rest of ``FinetuneConfig`` at its defaults, one run
per seed, no restarts), and scored on 200 validation examples: the choice is made on validation,
never on the test split that ``central_claim.py`` reports.

    python bench/finetune_sweep.py [--lrs 1e-4 3e-4 1e-3] [--epochs 3 6] [--seeds 0 1 2] [--threads 1]

Prints one JSON line per run, then per (task, family) the mean validation accuracy of each setting.
"""

import argparse
import dataclasses
import itertools
import json
import statistics

from minis import load_minis

from bertgpt.config import FinetuneConfig
from bertgpt.finetune import finetune
from bertgpt.tasks import load_task


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["era", "next"])
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3])
    parser.add_argument("--epochs", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--val", type=int, default=200)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    corpus, checkpoints = load_minis(args.families, args.threads)
    table = {}
    for name in args.tasks:
        task = load_task(name, corpus)
        task = dataclasses.replace(task, val=task.val[:args.val], test=[])
        for family, lr, epochs in itertools.product(args.families, args.lrs, args.epochs):
            accs = []
            for seed in args.seeds:
                cfg = FinetuneConfig(lr=lr, epochs=epochs, seed=seed)
                small = task.subsample(args.examples, seed=seed)
                _, r = finetune(checkpoints[family], small, cfg, device="cpu")
                accs.append(r["val_accuracy"])
                print(json.dumps(dict(task=name, family=family, lr=lr, epochs=epochs, seed=seed,
                                      val_accuracy=r["val_accuracy"], best_epoch=r["best_epoch"],
                                      seconds=r["seconds"])), flush=True)
            row = table.setdefault(f"{name}/{family}", {})
            row[f"lr={lr:g} epochs={epochs}"] = round(statistics.mean(accs), 4)
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
