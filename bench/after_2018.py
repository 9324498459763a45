"""Two questions of what came after 2018, in miniature, for chapter 9 (issue 50).

**Causal, then masked.** bert-mini-ltr (bert-mini's recipe, shape and tokens, trained left to right)
is rebuilt as a masked LM (``bertgpt.pretraining.as_masked_lm``) and trained ``--steps`` more updates
with the masked objective; bert-mini-mlm (the same recipe, masked throughout) gets the same updates
on the same schedule (``bertgpt.adapted(..., objective="masked")`` against ``bertgpt.adapted``). So
both have read the same tokens for the same number of updates, and differ only in the objective of
their first 16,000: Ettin (Weller et al., 2025) found turning one kind into the other by continued
training worse than training natively, Gisserot-Boukhlef et al. (2025) a causal-then-masked
schedule best at a fixed budget. Scored by the validation masked-token accuracy along the continued
run (15% of the tokens chosen, top 1) and by fine-tuning on ``era`` (``bertgpt.label_curve``).

**Replaced-token detection against masked LM, at equal compute.** ELECTRA's discriminator
(``bertgpt.electra``: bert-mini-mlm's shape, tokens and recipe, a generator half as wide, 15% of the
tokens replaced) trained from random weights for as many updates as cost the FLOPs of ``--mlm-steps``
masked-LM updates of bert-mini-mlm's recipe; both fine-tuned on ``era``, beside the same
architecture from scratch. Clark et al. (2020) claimed ELECTRA's largest gain at small scale.

**ELECTRA's learning rate.** The shipped electra-mini and bert-mini-mlm fine-tuned on 64 labelled
paragraphs of ``era``, as chapter 9 does, at each of ``--rates`` (chapter 9 uses the family's,
3e-4): does a rate chosen for ELECTRA close the gap? Each rate's mean validation accuracy says which
rate a learner would pick without touching the test set.

**Prompting instead of fine-tuning.** gpt-mini reads ``k`` labelled paragraphs of each era in its
context and names the era of a test paragraph, with no update (``zeroshot.in_context_accuracy``:
GPT-3's in-context learning), against fine-tuning on the same paragraphs (which also choose its
epoch, so it sees no other label). Paragraphs are cut to ``--words`` so that the prompts fit.

    python bench/after_2018.py [--steps 200] [--mlm-steps 300] [--seeds 0 1 2] [--shots 0 1] [--words 14]
                               [--rates 3e-5 1e-4 3e-4 1e-3 3e-3]
                               [--only causal electra electra-lr prompting] [--threads 1]

Prints one JSON object per measurement, then a summary table; the continued models are cached.
"""

import argparse
import dataclasses
import json
import statistics
import time

import torch

import bertgpt
from bertgpt import zeroshot
from bertgpt.compute import flops_per_token
from bertgpt.config import FinetuneConfig
from bertgpt.objectives import generator_config


def causal_then_masked(steps: int, seeds) -> list[dict]:
    recipe = dict(warmup=20, eval_every=50)
    runs = {"causal, then masked": bertgpt.adapted("bert-mini-ltr", "sotu", steps, objective="masked",
                                                   recipe=recipe, progress=False),
            "masked throughout": bertgpt.adapted("bert-mini-mlm", "sotu", steps, recipe=recipe,
                                                 progress=False)}
    era = bertgpt.load_task("era").trimmed(40, val=150, test=450)
    rows = []
    for name, ck in runs.items():
        curve = [(r["step"], round(r["mlm_accuracy"], 4)) for r in ck.info["history"]["val"]]
        tuned = bertgpt.label_curve(ck, era, (256,), seeds=seeds)[256]
        rows.append(dict(experiment="causal-then-masked", start=name, extra_updates=steps, mlm_accuracy=curve,
                         era_256=[round(a, 4) for a in tuned], era_256_mean=round(statistics.mean(tuned), 4)))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def electra_vs_mlm(mlm_steps: int, seeds) -> list[dict]:
    mlm = bertgpt.pretrained("bert-mini-mlm", changes=dict(steps=mlm_steps), progress=False)
    cfg = mlm.model.config
    steps = round(mlm_steps / (1 + flops_per_token(generator_config(cfg)) / flops_per_token(cfg)))
    runs = {"masked LM": mlm, "ELECTRA": bertgpt.electra(steps=steps, progress=False),
            "from scratch": bertgpt.untrained("bert-mini-mlm")}
    era = bertgpt.load_task("era").trimmed(40, val=150, test=450)
    rows = []
    for name, ck in runs.items():
        tuned = bertgpt.label_curve(ck, era, (256,), seeds=seeds)[256]
        rows.append(dict(experiment="electra", objective=name, updates=ck.info.get("step", 0),
                         seconds=round(ck.info.get("metrics", {}).get("seconds", 0), 1),
                         era_256=[round(a, 4) for a in tuned], era_256_mean=round(statistics.mean(tuned), 4)))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def electra_rates(rates, seeds, n_labels: int = 64) -> list[dict]:
    starts = {"masked LM": bertgpt.pretrained("bert-mini-mlm"), "ELECTRA": bertgpt.pretrained("electra-mini")}
    era = bertgpt.load_task("era").trimmed(40, val=150, test=450)
    rows = []
    for lr in rates:
        for name, ck in starts.items():
            runs = [bertgpt.finetune(ck, era.subsample(n_labels, seed=s), FinetuneConfig(
                epochs=8, patience=3, lm_coef=0.0, seed=s, lr=lr), progress=False)[1] for s in seeds]
            val, test = ([r[f"{split}_accuracy"] for r in runs] for split in ("val", "test"))
            rows.append(dict(experiment="electra-lr", objective=name, lr=lr, labels=n_labels,
                             val=[round(a, 4) for a in val], val_mean=round(statistics.mean(val), 4),
                             test=[round(a, 4) for a in test], test_mean=round(statistics.mean(test), 4)))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def prompting(shots, seeds, words: int) -> list[dict]:
    gpt = bertgpt.pretrained("gpt-mini")
    era = bertgpt.load_task("era").trimmed(words, val=150, test=450)  # short, so the demonstrations fit
    rows = []
    for k in shots:
        draws = (0,) if k == 0 else seeds
        accs = [zeroshot.in_context_accuracy(gpt, era, k, seed=s) for s in draws]
        rows.append(dict(experiment="in-context", shots_per_class=k, accuracy=[round(a, 4) for a in accs]))
        print(json.dumps(rows[-1]), flush=True)
        if k:  # fine-tuned on the same demonstrations, which also choose its epoch
            tuned = []
            for s in seeds:
                demos = zeroshot.demonstrations(era, k, s)
                cfg = FinetuneConfig(epochs=8, patience=3, lm_coef=0.0, seed=s)
                same = dataclasses.replace(era, train=demos, val=demos)
                tuned.append(bertgpt.finetune(gpt, same, cfg, progress=False)[1]["test_accuracy"])
            rows.append(dict(experiment="fine-tuned on the same", shots_per_class=k,
                             accuracy=[round(a, 4) for a in tuned]))
            print(json.dumps(rows[-1]), flush=True)
    rows.append(dict(experiment="majority", accuracy=round(era.majority_baseline(), 4)))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--mlm-steps", type=int, default=300)
    p.add_argument("--only", nargs="+", default=["prompting", "electra", "causal"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--shots", type=int, nargs="+", default=[0, 1])
    p.add_argument("--words", type=int, default=14, help="paragraphs cut to this many words")
    p.add_argument("--rates", type=float, nargs="+", default=[3e-5, 1e-4, 3e-4, 1e-3, 3e-3])
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    rows = []
    if "prompting" in args.only:
        rows += prompting(args.shots, args.seeds, args.words)
    if "electra" in args.only:
        rows += electra_vs_mlm(args.mlm_steps, args.seeds)
    if "electra-lr" in args.only:
        rows += electra_rates(args.rates, args.seeds)
    if "causal" in args.only:
        rows += causal_then_masked(args.steps, args.seeds)
    print(json.dumps(dict(rows=rows, seconds=round(time.perf_counter() - start))))


if __name__ == "__main__":
    main()
