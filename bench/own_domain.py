"""What pretraining on the addresses is worth on text of another genre, and what continuing buys (issue 17).

On the King James Bible's ``genre`` task (a verse and its division of the Bible: six classes, balanced),
each family's mini is fine-tuned on the same few hundred labelled verses, over several seeds, from:

    scratch     the mini's architecture and tokenizer with random weights (``bertgpt.untrained``)
    addresses   the cached mini, pretrained on the State of the Union addresses
    adapted     that mini after ``--adapt-steps`` more updates of its own objective on the Bible's
                training chapters (``bertgpt.continue_pretraining``; no test chapter is ever seen)
    bible       the mini's whole recipe on the Bible's training chapters alone, with a tokenizer
                trained on them (``bertgpt.pretrained(name, corpus=bible)``, cached like the minis)

A condition may carry fine-tuning fields, ``addresses:lm_coef=0`` or ``scratch:lr=3e-4``, to look for
the cause of a gap (the learning rate, GPT's λ·L_LM on foreign text, too few updates: ``epochs``), and
``scratch-own`` is scratch with a tokenizer of the same size trained on the Bible (does the
addresses' vocabulary, which cuts the Bible finer, hurt by itself?). Everything else is
``FinetuneConfig``'s defaults, one run per seed (``--set restarts=3`` for central_claim.py's protocol).
Accuracy is on the test split's verses; hyperparameters are fixed in advance.

    python bench/own_domain.py [--families gpt bert] [--conditions scratch addresses adapted]
                               [--examples 300] [--seeds 0 1 2] [--adapt-steps 300] [--threads 1]

The adapted checkpoints are kept in ``--cache`` (default ``$BERTGPT_CACHE/bench-own-domain``) and
reused. Prints one JSON line per run, then a JSON table: per family and condition, the mean test
accuracy, its spread (max - min over seeds) and the gain over scratch.
"""

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

from minis import load_minis

import bertgpt
from bertgpt.config import FinetuneConfig, apply_overrides
from bertgpt.pretraining import (
    DEFAULT_TOKENIZER,
    clm_loss,
    continuation_config,
    continue_pretraining,
    mlm_nsp_loss,
    pretraining_data,
    summary,
)
from bertgpt.tokenizer import cache_dir, coverage, tokenizer_for


def adapted(ck, family: str, bible, steps: int, cache) -> tuple:
    """(the mini continued on the Bible for ``steps`` updates, what the run measured), cached.

    What was measured includes ``start``: the mini's validation figures on the Bible before the run,
    on the batches the run validates on."""
    cfg = continuation_config(ck, steps)
    _, val = pretraining_data(bible, ck.tokenizer, ck.config, cfg)
    start = bertgpt.validate(ck.model, clm_loss if family == "gpt" else mlm_nsp_loss, val)
    directory = cache / f"{family}-mini-kjv-{steps}"
    if directory.exists():
        done = bertgpt.load(directory, family)
        return done, dict(done.info["adaptation"], start=start)
    tic = time.perf_counter()
    model, tok, history = continue_pretraining(ck, bible, cfg, device="cpu", progress=False)
    info = dict(summary(model, history), seconds=round(time.perf_counter() - tic, 1),
                coverage=history.setup["coverage"], val=history.val)
    bertgpt.save(directory, model, tok, adaptation=info)
    return bertgpt.load(directory, family), dict(info, start=start)


def own_tokenizer_blank(blank, bible):
    """``blank``'s architecture with a tokenizer of the same size trained on the Bible: random weights."""
    tok = tokenizer_for(bible, DEFAULT_TOKENIZER[blank.model.family], blank.config.vocab_size)
    cfg = dataclasses.replace(blank.config, vocab_size=tok.vocab_size)
    return bertgpt.Checkpoint(bertgpt.build(cfg, blank.model.family).eval(), tok, dict(untrained=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--conditions", nargs="+", default=["scratch", "addresses", "adapted"])
    parser.add_argument("--examples", type=int, default=300, help="labelled training verses")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--adapt-steps", type=int, default=300, help="updates of continued pretraining")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change a FinetuneConfig field for every condition")
    parser.add_argument("--val", type=int, default=200, help="validation verses for early stopping")
    parser.add_argument("--cache", help="where the adapted minis are kept")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    corpus, minis = load_minis(args.families, args.threads)
    bible = bertgpt.load_corpus("kjv")
    task = bertgpt.load_task("genre", bible)
    task = dataclasses.replace(task, val=task.val[:args.val])
    (recipe,) = apply_overrides(args.set, FinetuneConfig())
    cache = Path(args.cache) if args.cache else cache_dir() / "bench-own-domain"
    runs, adaptation = [], {}
    for family in args.families:
        blank = bertgpt.untrained(f"{family}-mini", corpus)
        inits = dict(scratch=blank, addresses=minis[family])
        if any(c.startswith("adapted") for c in args.conditions):
            inits["adapted"], adaptation[family] = adapted(minis[family], family, bible, args.adapt_steps,
                                                           cache)
            print(json.dumps(dict(family=family, adaptation=adaptation[family])), flush=True)
        if any(c.startswith("scratch-own") for c in args.conditions):
            inits["scratch-own"] = own_tokenizer_blank(blank, bible)
        if any(c.startswith("bible") for c in args.conditions):  # the mini's recipe, on the Bible alone
            inits["bible"] = bertgpt.pretrained(f"{family}-mini", corpus=bible, progress=False)
        fits = {name: coverage(ck.tokenizer, [e.text for e in task.train]) for name, ck in inits.items()}
        for condition in args.conditions:
            init, _, changes = condition.partition(":")
            (cfg,) = apply_overrides([c for c in changes.split(",") if c], recipe)
            for seed in args.seeds:
                small = task.subsample(args.examples, seed=seed)
                _, r = bertgpt.finetune(inits[init], small, dataclasses.replace(cfg, seed=seed),
                                        from_scratch=init.startswith("scratch"), device="cpu")
                r.pop("history")
                r.update(condition=condition, tokens_per_word=fits[init]["tokens_per_word"])
                runs.append(r)
                print(json.dumps(r), flush=True)

    table = {}
    for family in args.families:
        rows = {}
        for condition in args.conditions:
            acc = [r["test_accuracy"] for r in runs if r["family"] == family and r["condition"] == condition]
            rows[condition] = dict(mean=round(statistics.mean(acc), 4), spread=round(max(acc) - min(acc), 4),
                                   runs=[round(a, 4) for a in acc])
        if "scratch" in rows:
            for row in rows.values():
                row["gain"] = round(row["mean"] - rows["scratch"]["mean"], 4)
                row["gain_exceeds_spread"] = row["gain"] > max(row["spread"], rows["scratch"]["spread"])
        table[family] = rows
    print(json.dumps(dict(task="genre", examples=args.examples, seeds=args.seeds, val=args.val,
                          adapt_steps=args.adapt_steps, recipe=dataclasses.asdict(recipe),
                          majority_baseline=task.majority_baseline(), adaptation=adaptation, table=table),
                     indent=1))
    for family, rows in table.items():
        for condition, row in rows.items():
            print(f"{family:5s} {condition:28s} {row['mean']:.3f} ± {row['spread'] / 2:.3f}   "
                  f"gain {row.get('gain', 0):+.3f}   runs {row['runs']}")


if __name__ == "__main__":
    main()
