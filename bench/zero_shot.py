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
import random

import torch
from minis import load_minis

from bertgpt.evaluate import accuracy
from bertgpt.finetune import collate, pack_examples
from bertgpt.scoring import log_likelihood, pseudo_log_likelihood, token_log_probs
from bertgpt.tasks import load_task, swap_neighbours
from bertgpt.trainer import eval_mode

TASKS = ["acceptability", "next"]


def accuracy_at(t: float, scores: list[float], labels: list[int]) -> float:
    """Accuracy of predicting label 1 exactly when ``score > t``."""
    return accuracy(labels, [int(s > t) for s in scores])


def best_threshold(scores: list[float], labels: list[int]) -> float:
    """The threshold (a midpoint between neighbouring scores) that is most accurate on these examples."""
    ranked = sorted(scores)
    cuts = [ranked[0] - 1] + [(a + b) / 2 for a, b in zip(ranked, ranked[1:])]
    return max(cuts, key=lambda t: accuracy_at(t, scores, labels))


def thresholded(score, val, test) -> dict:
    """Choose the threshold on ``val``, report accuracy on both."""
    val_scores, val_labels = [score(e) for e in val], [e.label for e in val]
    test_scores, test_labels = [score(e) for e in test], [e.label for e in test]
    t = best_threshold(val_scores, val_labels)
    return dict(threshold=round(t, 4), val_accuracy=round(accuracy_at(t, val_scores, val_labels), 4),
                test_accuracy=round(accuracy_at(t, test_scores, test_labels), 4))


def acceptability(ck, task, n: int) -> dict:
    scorer = log_likelihood if ck.model.family == "gpt" else pseudo_log_likelihood

    def score(text):
        return scorer(ck.model, ck.tokenizer, text)

    rng = random.Random(0)
    pairs = [(e.text, swap_neighbours(e.text.split(), rng)) for e in task.test[:n] if e.label == 1]
    pairs = [(a, " ".join(b)) for a, b in pairs if b]
    preferred = sum(score(a).log_prob > score(b).log_prob for a, b in pairs) / len(pairs)
    return dict(pairs=len(pairs), original_preferred=round(preferred, 4),
                **thresholded(lambda e: score(e.text).mean, task.val[:n], task.test[:n]))


@torch.no_grad()
def nsp_accuracy(ck, examples) -> float:
    """Accuracy of BERT's pretrained next-sentence head (class 1 = is next) on pair examples."""
    rows = pack_examples(ck.tokenizer, "bert", ck.config.context, examples)
    hits = 0
    with eval_mode(ck.model) as model:
        for s in range(0, len(rows), 64):
            batch = collate(rows[s:s + 64], ck.tokenizer)
            out = model(batch["input_ids"], segments=batch["segments"], pad_mask=batch["pad_mask"],
                        predict=False)
            hits += int((out.nsp_logits.argmax(-1) == batch["label"]).sum())
    return hits / len(rows)


def next_paragraph(ck, task, n: int, span: int) -> dict:
    if ck.model.family == "bert":
        return dict(val_accuracy=round(nsp_accuracy(ck, task.val[:n]), 4),
                    test_accuracy=round(nsp_accuracy(ck, task.test[:n]), 4))
    tok = ck.tokenizer

    def gain(e):  # log p(B | A) - log p(B), over B's first `span` tokens
        a, b = tok.encode(e.text)[-span:], tok.encode(e.text_b)[:span]
        with_a = token_log_probs(ck.model, [tok.sep_id, *a, *b])[-len(b):].sum()
        alone = token_log_probs(ck.model, [tok.sep_id, *b]).sum()
        return float(with_a - alone)

    return thresholded(gain, task.val[:n], task.test[:n])


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
