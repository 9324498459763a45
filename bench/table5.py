"""The course models fine-tuned on the addresses' tasks, three seeds each, and BERT's Table 5 in
miniature, with the token-level task among them.

    PYTHONPATH=code python bench/table5.py [--tasks era,next,boundaries] [--models ...] [--out F]

For every model and task: the test score of three fine-tuning runs (seeds 0, 1, 2; the package's
recipe, ``FinetuneConfig(epochs=3)``, on the task's 2,000 training examples), its mean, the seeds'
range, and the binomial standard error of one run on the test set (accuracy; for ``boundaries``,
the F1 of "ends a sentence", whose standard error comes from resampling the test passages of the
last seed's run). Beside them, the constant answer and, for
``boundaries``, two count-based taggers from the training passages: one that sees the word and the
one before it (what a left-to-right reader has when it must answer), one that sees the word and the
one after it. The F1 counts a boundary where the model's P(ends a sentence) > 0.5; the row also
gives each run's F1 at a threshold chosen on the validation passages (what the model knows, apart
from how it is calibrated), as the count taggers are scored.

Models: the course models (gpt-mini, bert-mini) and the Table 5 rows (bert-mini = MLM + NSP,
bert-mini-mlm = MLM only, bert-mini-ltr = left to right), all shipped (``bertgpt.hub.TABLE5``).
Prints one JSON line per (model, task) and a table; about 40 minutes on one core for the defaults.
"""

import argparse
import json
import math
import random
import time
from collections import Counter

import torch

import bertgpt
from bertgpt.finetune import score_name
from bertgpt.inputs import IGNORE

MODELS = ("gpt-mini", "bert-mini", "bert-mini-mlm", "bert-mini-ltr")
TASKS = ("era", "next", "boundaries")
SEEDS = (0, 1, 2)
EPOCHS = 3  # the package's recipe otherwise; 3 epochs of 2,000 examples instead of its 6 of a few hundred


def scored_words(passages):
    """(previous word, word, next word, tag) of every scored word of token-level examples."""
    for e in passages:
        padded = ("<s>", *e.words, "</s>")
        for i, tag in enumerate(e.tags):
            if tag != IGNORE:
                yield padded[i], padded[i + 1], padded[i + 2], tag


class CountTagger:
    """P(ends a sentence | a word and one neighbour) from training counts, backing off to the word
    alone; a boundary wherever it exceeds a threshold chosen for F1 on the validation passages."""

    def __init__(self, task, side: str):
        self.side = side
        self.pair, self.word = Counter(), Counter()
        for prev, word, nxt, tag in scored_words(task.train):
            for table, key in ((self.pair, self.key(prev, word, nxt)), (self.word, word)):
                table[key, tag] += 1
        val = list(scored_words(task.val))
        self.threshold = max((t / 20 for t in range(1, 20)), key=lambda t: self.f1(val, t))

    def key(self, prev, word, nxt):
        return (prev, word) if self.side == "left" else (word, nxt)

    def p(self, prev, word, nxt) -> float:
        for table, key in ((self.pair, self.key(prev, word, nxt)), (self.word, word)):
            seen = table[key, 0] + table[key, 1]
            if seen:
                return table[key, 1] / seen
        return 0.0

    def f1(self, words, threshold=None) -> float:
        threshold = self.threshold if threshold is None else threshold
        predicted = [int(self.p(a, w, b) > threshold) for a, w, b, _ in words]
        return bertgpt.f1([t for *_, t in words], predicted)


def bootstrap_f1_error(classifier, task, n_resamples: int = 200) -> float:
    """The standard error of the boundary F1 of ``classifier``, by resampling the test passages."""
    predicted = bertgpt.predict(classifier, task.test)
    truth = [[t for t in e.tags if t != IGNORE][:len(p)] for e, p in zip(task.test, predicted)]
    rng, scores = random.Random(0), []
    for _ in range(n_resamples):
        picks = [rng.randrange(len(truth)) for _ in truth]
        scores.append(bertgpt.f1([t for i in picks for t in truth[i]],
                                 [t for i in picks for t in predicted[i]]))
    mean = sum(scores) / len(scores)
    return math.sqrt(sum((s - mean) ** 2 for s in scores) / (len(scores) - 1))


@torch.no_grad()
def boundary_probabilities(classifier, passages) -> tuple[list[float], list[int]]:
    """P(ends a sentence) and the true tag of every scored word of ``passages``."""
    probs, truth = [], []
    for e in passages:
        ids, segments, tags = classifier.pack([e])[0]
        batch = classifier.collate([(ids, segments, tags)])
        p = classifier(batch).float().softmax(-1)[0, :, 1]
        kept = [i for i, t in enumerate(tags) if t != IGNORE]
        probs += p[kept].tolist()
        truth += [tags[i] for i in kept]
    return probs, truth


def tuned_f1(classifier, task) -> tuple[float, float]:
    """(threshold, test F1) with the decision threshold on P(ends a sentence) chosen for F1 on the
    validation passages instead of 0.5: what the model knows, apart from how it is calibrated."""
    classifier.eval()
    val_p, val_t = boundary_probabilities(classifier, task.val)
    test_p, test_t = boundary_probabilities(classifier, task.test)

    def f1_at(probs, truth, threshold):
        return bertgpt.f1(truth, [int(p > threshold) for p in probs])

    threshold = max((t / 20 for t in range(1, 20)), key=lambda t: f1_at(val_p, val_t, t))
    return threshold, f1_at(test_p, test_t, threshold)


def constant(task) -> float:
    """The constant answer's score on test: the larger test class (accuracy); 0 F1 for boundaries."""
    if task.token_level:
        return 0.0
    counts = Counter(e.label for e in task.test)
    return max(counts.values()) / len(task.test)


def fine_tune_row(name: str, task) -> dict:
    ck = bertgpt.pretrained(name)
    scores, tuned, seconds = [], [], 0.0
    key = f"test_{score_name(task)}"
    for seed in SEEDS:
        classifier, result = bertgpt.finetune(ck, task, bertgpt.FinetuneConfig(epochs=EPOCHS, seed=seed))
        scores.append(result[key])
        seconds += result["seconds"]
        if task.token_level:
            tuned.append(tuned_f1(classifier, task)[1])
    mean = sum(scores) / len(scores)
    error = (bootstrap_f1_error(classifier, task) if task.token_level  # the last seed's run
             else math.sqrt(mean * (1 - mean) / len(task.test)))  # binomial, one run
    return dict(model=name, task=task.name, metric=score_name(task), scores=[round(s, 4) for s in scores],
                mean=round(mean, 4), seed_range=round(max(scores) - min(scores), 4),
                standard_error=round(error, 4), constant=round(constant(task), 4),
                train_examples=len(task.train), test_examples=len(task.test), seconds=round(seconds),
                **({"tuned_threshold_f1": [round(s, 4) for s in tuned]} if tuned else {}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", help="also write the JSON lines to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    random.seed(0)
    rows = []
    for task_name in args.tasks.split(","):
        task = bertgpt.load_task(task_name)
        if task.token_level:
            for side in ("left", "right"):
                tagger = CountTagger(task, side)
                rows.append(dict(model=f"counts, word and {side} neighbour", task=task.name, metric="f1",
                                 mean=round(tagger.f1(list(scored_words(task.test))), 4)))
                print(json.dumps(rows[-1]), flush=True)
        for name in args.models.split(","):
            tic = time.perf_counter()
            rows.append(fine_tune_row(name, task))
            print(json.dumps({**rows[-1], "wall": round(time.perf_counter() - tic)}), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"\n{'model':34} {'task':11} {'mean':>6} {'range':>6} {'2 SE':>6} {'constant':>8}")
    for r in rows:
        extra = (f"{r['seed_range']:6.3f} {2 * r['standard_error']:6.3f} {r['constant']:8.3f}"
                 if "scores" in r else "")
        print(f"{r['model']:34} {r['task']:11} {r['mean']:6.3f} {extra}")


if __name__ == "__main__":
    main()
