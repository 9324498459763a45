"""Zero-shot: what a pretrained model does on a task before it has seen one labelled example.

GPT-1 (Radford et al., 2018, section 5) tracked such heuristics along pretraining to argue that
the language model learns what the tasks need. Two of them, for this corpus's tasks:

- ``acceptability``, pairwise: for an acceptable sentence and the same sentence with two
  neighbouring words swapped (:func:`bertgpt.tasks.swap_neighbours`), does the model score the
  original higher? GPT scores with its log-likelihood, BERT with its pseudo-log-likelihood.
- ``next``: how much paragraph A helps predict paragraph B, log p(B | A) - log p(B) over B's first
  ``span`` tokens (GPT), or BERT's next-sentence head as it left pretraining; a gain above a
  threshold, chosen on validation examples, says "B follows A".

And GPT-3's way with a classification task (Brown et al., 2020): :func:`in_context_accuracy` puts
labelled examples in the context and lets the model's next words pick the label, with no update.

Accuracies are on test examples, from addresses pretraining never saw::

    zero_shot_next(gpt, load_task("next"), n=200)["test_accuracy"]
    swap_preference(gpt, load_task("acceptability"), n=200)
"""

from __future__ import annotations

import random

import torch

from .config import PretrainConfig
from .data import bert_collate
from .device import device_of, eval_mode, to_device
from .inputs import collate, pack_examples, pad
from .scoring import pseudo_log_likelihood, token_log_probs
from .stats import accuracy, best_threshold
from .tasks import Example, Task, swap_neighbours


@torch.no_grad()
def row_log_probs(model, rows: list[list[int]], batch_size: int = 32) -> list[torch.Tensor]:
    """For each row of token ids (at most the context long), log p(row[t] | row[<t]), t >= 1, under a
    left-to-right model; rows are right-padded into batches, which no causal position can see."""
    out = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    device = device_of(model)
    with eval_mode(model):
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            x = pad([rows[i] for i in chunk], 0)  # (B, T)
            logp = model(x.to(device)).logits.float().log_softmax(-1).cpu()  # (B, T, V)
            for j, i in enumerate(chunk):
                n = len(rows[i])
                out[i] = logp[j, torch.arange(n - 1), x[j, 1:n]]
    return out


def text_log_probs(model, tokenizer, texts: list[str]) -> list[float]:
    """:func:`bertgpt.scoring.log_likelihood` of each text (from [SEP]), batched where a text fits
    the context."""
    rows = [[tokenizer.sep_id, *tokenizer.encode(t)] for t in texts]
    fits = [i for i, r in enumerate(rows) if len(r) <= model.config.context]
    totals = [None if len(r) <= model.config.context else float(token_log_probs(model, r).sum())
              for r in rows]  # sliding windows for the longer ones
    for i, logp in zip(fits, row_log_probs(model, [rows[i] for i in fits])):
        totals[i] = float(logp.sum())
    return totals


def thresholded(val_scores: list[float], val: list[Example], test_scores: list[float],
                test: list[Example]) -> dict:
    """Choose the threshold on validation scores; report accuracy on both splits."""
    cut = best_threshold(val_scores, [e.label for e in val])

    def acc(scores, examples):
        return accuracy([e.label for e in examples], [int(s > cut) for s in scores])

    return dict(threshold=cut, val_accuracy=acc(val_scores, val), test_accuracy=acc(test_scores, test))


def context_gains(model, tokenizer, examples: list[Example], span: int = 60) -> list[float]:
    """log p(B | A) - log p(B) over B's first ``span`` tokens, for each pair example, under a GPT
    (or any left-to-right model); A contributes its last ``span`` tokens, and both start at [SEP].
    ``span`` shrinks to fit the model's context."""
    span = min(span, (model.config.context - 1) // 2)
    rows = []
    for e in examples:
        a, b = tokenizer.encode(e.text)[-span:], tokenizer.encode(e.text_b)[:span]
        rows += [[tokenizer.sep_id, *a, *b], [tokenizer.sep_id, *b]]
    logp = row_log_probs(model, rows)
    return [float(logp[i][-(len(logp[i + 1])):].sum() - logp[i + 1].sum()) for i in range(0, len(rows), 2)]


@torch.no_grad()
def nsp_log_odds(model, batch) -> torch.Tensor:
    """The log-odds (B,) that B follows A, by BERT's pretrained next-sentence head, of a pair batch."""
    out = model(batch["input_ids"], segments=batch["segments"], pad_mask=batch["pad_mask"], predict=False)
    if out.nsp_logits is None:
        raise ValueError("this BERT was pretrained without next-sentence prediction and has no NSP head: "
                         "score pairs with a model that has one (bert-mini), or fine-tune this one")
    return out.nsp_logits[:, 1] - out.nsp_logits[:, 0]


@torch.no_grad()
def nsp_scores(model, tokenizer, examples: list[Example]) -> list[float]:
    """BERT's pretrained next-sentence head: log-odds that B follows A, for each pair example."""
    rows = pack_examples(tokenizer, "bert", model.config.context, examples)
    scores = []
    with eval_mode(model):
        for s in range(0, len(rows), 64):
            batch = to_device(collate(rows[s:s + 64], tokenizer), device_of(model))
            scores += nsp_log_odds(model, batch).float().tolist()
    return scores


@torch.no_grad()
def nsp_pair_scores(model, tokenizer, pairs, generator: torch.Generator | None = None,
                    batch_size: int = 32) -> torch.Tensor:
    """BERT's pretrained next-sentence head on token pairs ``(A, B, is_next)`` as validation reads
    them: batches of ``batch_size`` from :func:`~bertgpt.data.bert_collate`, masked at the
    paper's 15% with ``generator``'s draws. Returns the log-odds that B follows A, (N,).

    With the model card's pairs (:func:`bertgpt.heldout.test_pairs`) and a generator seeded with
    :data:`bertgpt.heldout.SEED`, the share of log-odds on the right side of 0 is the card's NSP
    accuracy."""
    generator = generator or torch.Generator().manual_seed(0)
    scores = []
    with eval_mode(model):
        for s in range(0, len(pairs), batch_size):
            batch = bert_collate(pairs[s:s + batch_size], tokenizer, PretrainConfig.val_mask_rate, generator)
            batch = to_device(batch, device_of(model))
            scores.append(nsp_log_odds(model, batch).float().cpu())
    return torch.cat(scores)


def zero_shot_next(checkpoint, task: Task, n: int = 200, span: int = 60) -> dict:
    """Zero-shot accuracy on a pair task such as ``next``: GPT by :func:`context_gains` and a
    threshold chosen on ``n`` validation examples; BERT by its next-sentence head (threshold 0 is
    the head's own decision; the chosen one is reported too). Tested on ``n`` test examples."""
    model, tok = checkpoint.model, checkpoint.tokenizer
    val, test = task.val[:n], task.test[:n]
    if model.family == "bert":
        scores = nsp_scores(model, tok, val), nsp_scores(model, tok, test)
        head = accuracy([e.label for e in test], [int(s > 0) for s in scores[1]])
        return dict(thresholded(scores[0], val, scores[1], test), head_test_accuracy=head)
    return thresholded(context_gains(model, tok, val, span), val, context_gains(model, tok, test, span), test)


def swap_pairs(task: Task, n: int = 200, seed: int = 0) -> list[tuple[str, str]]:
    """(sentence, the same with two neighbouring words swapped) for the first ``n`` acceptable test
    sentences that have a swap to make."""
    rng = random.Random(seed)
    pairs = [(e.text, swap_neighbours(e.text.split(), rng)) for e in task.test[:n] if e.label == 1]
    return [(a, " ".join(b)) for a, b in pairs if b]


def swap_preference(checkpoint, task: Task, n: int = 200, seed: int = 0) -> float:
    """Share of :func:`swap_pairs` where the model scores the original sentence higher (0.5 is chance)."""
    model, tok = checkpoint.model, checkpoint.tokenizer
    pairs = swap_pairs(task, n, seed)
    if model.family == "bert":
        pll = [pseudo_log_likelihood(model, tok, t).log_prob for pair in pairs for t in pair]
        wins = [pll[i] > pll[i + 1] for i in range(0, len(pll), 2)]
    else:
        total = text_log_probs(model, tok, [t for pair in pairs for t in pair])
        wins = [total[i] > total[i + 1] for i in range(0, len(total), 2)]
    return sum(wins) / len(wins)



def in_context_prompt(demos: list[tuple[str, str]], text: str) -> str:
    """The text a GPT reads before a label: each labelled demonstration as "TEXT (LABEL)." on a
    line of its own, then the example to classify, "TEXT (", whose label the model's next words give."""
    return "".join(f"{t} ({label}).\n" for t, label in demos) + f"{text} ("


def demonstrations(task: Task, shots: int, seed: int = 0) -> list[Example]:
    """``shots`` training examples of each class of ``task``, drawn with ``seed`` and shuffled: what
    :func:`in_context_accuracy` puts in the context, and so the labels a fair comparison fine-tunes
    on."""
    rng = random.Random(seed)
    demos = [e for c in range(len(task.labels))
             for e in rng.sample([e for e in task.train if e.label == c], shots)]
    rng.shuffle(demos)
    return demos


@torch.no_grad()
def in_context_accuracy(checkpoint, task: Task, shots: int, seed: int = 0, n: int | None = None) -> float:
    """Test accuracy of a GPT that reads ``shots`` labelled examples of each class in its context
    before every test example and answers with the label it finds most probable next: GPT-3's
    in-context learning, no weight updated. The demonstrations are :func:`demonstrations`; each label
    is scored by the mean log-probability of its tokens after :func:`in_context_prompt`. A prompt that
    leaves no room for the longest label within the context is refused, never cut: a cut prompt would
    lose demonstrations unseen. ``shots=0`` is zero-shot: the label's words alone. ``n`` test examples
    at most."""
    tok, model = checkpoint.tokenizer, checkpoint.model
    demos = [(e.text, task.labels[e.label]) for e in demonstrations(task, shots, seed)]
    labels = [tok.encode(label + ").") for label in task.labels]
    room = model.config.context - max(map(len, labels))
    test = task.test[:n]
    prompts = [tok.encode(in_context_prompt(demos, e.text)) for e in test]
    if (longest := max(map(len, prompts))) > room:
        raise ValueError(f"{shots} demonstration(s) per class and a test example take up to {longest} "
                         f"tokens, more than the {room} the context leaves before a label: use shorter "
                         "texts (Task.trimmed) or fewer shots")
    rows = [prompt + label for prompt in prompts for label in labels]
    k = len(labels)
    scores = [float(lp[-len(labels[i % k]):].mean()) for i, lp in enumerate(row_log_probs(model, rows))]
    predicted = [max(range(k), key=lambda c: scores[i * k + c]) for i in range(len(test))]
    return accuracy([e.label for e in test], predicted)
