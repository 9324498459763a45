"""Acceptability with no fine-tuning at all: what each objective already knows about word order.

The ``acceptability`` task (a sentence as written, or with two neighbouring words swapped) stays at
chance when either mini model is fine-tuned on it (see ``central_claim.py``). This script asks the
pretrained models directly, two ways:

- **pairwise**: for each acceptable test sentence and the same sentence with one neighbour swap
  (``bertgpt.tasks.swap_neighbours``), does the model give the original the higher score?
- **threshold**: GPT-1's zero-shot heuristic for CoLA (Radford et al., 2018, section 5): predict
  "acceptable" when the mean log-probability per token exceeds a threshold. The threshold is the
  one that is most accurate on the task's validation examples; accuracy is on its test examples,
  where each sentence appears once, in one form.

GPT scores with the log-likelihood, BERT with the pseudo-log-likelihood (``bertgpt.generate``).

    python bench/zero_shot_acceptability.py [--families gpt bert] [--examples 400] [--threads 1]

Prints one JSON line per family.
"""

import argparse
import json
import os
import random

import torch

import bertgpt
from bertgpt.generate import log_likelihood, pseudo_log_likelihood
from bertgpt.tasks import load_task, swap_neighbours


def accuracy_at(t: float, scores: list[float], labels: list[int]) -> float:
    """Accuracy of predicting label 1 exactly when ``score > t``."""
    return sum((s > t) == bool(y) for s, y in zip(scores, labels)) / len(scores)


def best_threshold(scores: list[float], labels: list[int]) -> float:
    """The threshold (a midpoint between neighbouring scores) that is most accurate on these examples."""
    ranked = sorted(scores)
    cuts = [ranked[0] - 1] + [(a + b) / 2 for a, b in zip(ranked, ranked[1:])]
    return max(cuts, key=lambda t: accuracy_at(t, scores, labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--examples", type=int, default=400, help="validation and test examples used")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    os.environ.setdefault("BERTGPT_QUIET", "1")
    if args.threads:
        torch.set_num_threads(args.threads)

    corpus = bertgpt.load_corpus()
    task = load_task("acceptability", corpus)
    val, test = task.val[:args.examples], task.test[:args.examples]
    rng = random.Random(0)
    pairs = [(e.text, swap_neighbours(e.text.split(), rng)) for e in test if e.label == 1]
    pairs = [(a, " ".join(b)) for a, b in pairs if b]
    for family in args.families:
        ck = bertgpt.pretrained(f"{family}-mini", corpus=corpus, progress=False)
        scorer = log_likelihood if family == "gpt" else pseudo_log_likelihood

        def score(text, ck=ck, scorer=scorer):
            return scorer(ck.model, ck.tokenizer, text)

        preferred = sum(score(a).log_prob > score(b).log_prob for a, b in pairs) / len(pairs)
        val_scores, val_labels = [score(e.text).mean for e in val], [e.label for e in val]
        test_scores, test_labels = [score(e.text).mean for e in test], [e.label for e in test]
        t = best_threshold(val_scores, val_labels)
        print(json.dumps(dict(family=family, pairs=len(pairs), original_preferred=round(preferred, 4),
                              threshold=round(t, 4),
                              val_accuracy=round(accuracy_at(t, val_scores, val_labels), 4),
                              test_accuracy=round(accuracy_at(t, test_scores, test_labels), 4),
                              majority_baseline=task.majority_baseline())), flush=True)

if __name__ == "__main__":
    main()
