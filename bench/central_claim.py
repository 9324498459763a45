"""The paradigm's central claim, measured: does pretraining help when labels are few?

For each task and each family (GPT, BERT), the pretrained mini model and the same architecture from a
random initialisation (``bertgpt.untrained``: the same tokenizer, never pretrained) are fine-tuned
on the same few hundred labelled examples with the same recipe (``FinetuneConfig``'s defaults, with
3 restarts; ``--set FIELD=VALUE`` changes any field), over several seeds. The seed changes the
subsample of training examples, the classifier's initialisation (and the scratch model's), dropout
and the order of batches. Accuracy is on the task's test split: addresses that neither pretraining
nor fine-tuning saw. Hyperparameters are fixed in advance; nothing is chosen on the test split.

Each seed's result is the best of ``restarts`` fine-tuning runs on validation (see
``FinetuneConfig.restarts``), as Devlin et al. (2019) did for unstable fine-tuning on small datasets.

    python bench/central_claim.py [--tasks era next] [--families gpt bert] [--examples 300] [--seeds 0 1 2]
                                 [--set lr=3e-4 --set restarts=3 ...] [--threads 1]

Prints one JSON line per run, then a JSON table: per task, family and initialisation, the mean
test accuracy, its spread (max - min over seeds) and the gain of pretraining over scratch.
"""

import argparse
import dataclasses
import json
import statistics

from minis import load_minis

from bertgpt.config import FinetuneConfig, apply_overrides
from bertgpt.finetune import finetune
from bertgpt.hub import untrained
from bertgpt.tasks import load_task


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["era", "next"])
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--examples", type=int, default=300, help="labelled training examples")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=["restarts=3"], metavar="FIELD=VALUE",
                        help="change a FinetuneConfig field (default: restarts=3)")
    parser.add_argument("--val", type=int, default=200,
                        help="validation examples for early stopping (a fixed prefix of the shuffled split)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    corpus, checkpoints = load_minis(args.families, args.threads)
    (recipe,) = apply_overrides(args.set, FinetuneConfig())
    blanks = {f: untrained(f"{f}-mini", corpus) for f in args.families}
    runs = []
    for name in args.tasks:
        task = load_task(name, corpus)
        task = dataclasses.replace(task, val=task.val[:args.val])
        for family in args.families:
            for seed in args.seeds:
                small = task.subsample(args.examples, seed=seed)
                for scratch in (False, True):
                    ck = blanks[family] if scratch else checkpoints[family]
                    cfg = dataclasses.replace(recipe, seed=seed)
                    _, r = finetune(ck, small, cfg, from_scratch=scratch, device="cpu")
                    r.pop("history")
                    runs.append(r)
                    print(json.dumps(r), flush=True)

    table = {}
    for name in args.tasks:
        for family in args.families:
            row = {}
            for scratch, key in ((False, "pretrained"), (True, "scratch")):
                acc = [r["test_accuracy"] for r in runs
                       if r["task"] == name and r["family"] == family and r["from_scratch"] == scratch]
                row[key] = dict(mean=round(statistics.mean(acc), 4), spread=round(max(acc) - min(acc), 4),
                                runs=[round(a, 4) for a in acc])
            row["gain"] = round(row["pretrained"]["mean"] - row["scratch"]["mean"], 4)
            spread = max(row["pretrained"]["spread"], row["scratch"]["spread"])
            row["gain_exceeds_spread"] = row["gain"] > spread
            row["majority_baseline"] = next(r["majority_baseline"] for r in runs if r["task"] == name)
            table[f"{name}/{family}"] = row
    print(json.dumps(dict(examples=args.examples, seeds=args.seeds, val=args.val,
                          recipe=dataclasses.asdict(recipe), table=table), indent=1))
    for key, row in table.items():
        p, s = row["pretrained"], row["scratch"]
        print(f"{key:22s} pretrained {p['mean']:.3f} ± {p['spread'] / 2:.3f}   scratch {s['mean']:.3f} ± "
              f"{s['spread'] / 2:.3f}   gain {row['gain']:+.3f}   majority {row['majority_baseline']:.3f}")


if __name__ == "__main__":
    main()
