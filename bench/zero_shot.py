"""Two tasks with no fine-tuning at all: what each pretraining objective already knows.

Fine-tuned on a few hundred examples (``central_claim.py``), gpt-mini reaches only 0.58 on ``next``
and neither model leaves chance on ``acceptability``. This script asks the pretrained models directly.

acceptability (a sentence as written, or with two neighbouring words swapped):

- *pairwise*: for each acceptable test sentence and the same sentence with one neighbour swap
  (``bertgpt.tasks.swap_neighbours``), does the model give the original the higher score?
- *threshold*: GPT-1's zero-shot heuristic for CoLA (Radford et al., 2018, section 5): "acceptable"
  when the mean log-probability per token exceeds a threshold.

GPT scores a text with its log-likelihood, BERT with its pseudo-log-likelihood (``bertgpt.scoring``).

next (does paragraph B follow paragraph A):

- BERT: its next-sentence-prediction head, unchanged from pretraining, on ``[CLS] A [SEP] B [SEP]``.
- GPT: how much A helps predict B, log p(B | A) - log p(B) summed over B's tokens (the last
  ``--span`` tokens of A, the first ``--span`` of B), with a threshold.

Every threshold is the one most accurate on the task's validation examples; accuracy is on its test
examples (addresses neither pretraining nor the threshold saw), where each text appears once.

    python bench/zero_shot.py [--tasks acceptability next] [--families gpt bert] [--examples 400]

Prints one JSON line per task and family.
"""

import argparse
import json

from minis import load_minis

from bertgpt.scoring import log_likelihood, pseudo_log_likelihood
from bertgpt.tasks import load_task
from bertgpt.zeroshot import swap_pairs, swap_preference, thresholded, zero_shot_next

TASKS = ["acceptability", "next"]


def acceptability(ck, task, n: int) -> dict:
    scorer = log_likelihood if ck.model.family == "gpt" else pseudo_log_likelihood

    def mean_score(examples):
        return [scorer(ck.model, ck.tokenizer, e.text).mean for e in examples]

    val, test = task.val[:n], task.test[:n]
    result = thresholded(mean_score(val), val, mean_score(test), test)
    return dict(pairs=len(swap_pairs(task, n)), original_preferred=round(swap_preference(ck, task, n), 4),
                **{k: round(v, 4) for k, v in result.items()})


def next_paragraph(ck, task, n: int, span: int) -> dict:
    return {k: round(v, 4) for k, v in zero_shot_next(ck, task, n, span).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=TASKS, choices=TASKS)
    parser.add_argument("--families", nargs="+", default=["gpt", "bert"])
    parser.add_argument("--examples", type=int, default=400, help="validation and test examples used")
    parser.add_argument("--span", type=int, default=60, help="tokens of A and of B that GPT reads on next")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    corpus, checkpoints = load_minis(args.families, args.threads)
    for name in args.tasks:
        task = load_task(name, corpus)
        for family, ck in checkpoints.items():
            result = (acceptability(ck, task, args.examples) if name == "acceptability"
                      else next_paragraph(ck, task, args.examples, args.span))
            print(json.dumps(dict(task=name, family=family, **result,
                                  majority_baseline=task.majority_baseline())), flush=True)


if __name__ == "__main__":
    main()
