"""The implement-it exercises: each chapter's worked solution passes its check, the stub left as it is
gets a message rather than a traceback, and the usual wrong answers fail with the message that names
the mistake."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import bertgpt
from bertgpt.exercises import EXERCISES, check, verdict
from bertgpt.inputs import IGNORE

ROOT = Path(__file__).resolve().parents[1]
CHECK = re.compile(r'bertgpt\.check\("(ex-[\w-]+)", (\w+)\)')


def _cells():
    """(label, stub source, solution source) of every checked exercise in the chapters."""
    found = {}
    for chapter in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        in_solution = None
        for cell in cells:
            text = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                opened = re.search(r"\{solution-start\} (ex-[\w-]+)", text)
                closed = "{solution-end}" in text
                in_solution = opened.group(1) if opened else (None if closed else in_solution)
                continue
            for label, name in CHECK.findall(text):
                kind = "solution" if in_solution == label else "stub"
                found.setdefault(label, {})[kind] = (text, name)
    return found


CELLS = _cells()


def _run(source: str, name: str):
    """The function ``name`` that a chapter cell defines (the cell runs whole, its check included)."""
    namespace = dict(torch=torch, F=F, Counter=Counter, bertgpt=bertgpt, IGNORE=IGNORE)
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace[name]


def test_the_book_sets_at_least_eight_checked_exercises_each_with_a_stub_and_a_solution():
    assert len(EXERCISES) >= 8
    for label in EXERCISES:
        assert set(CELLS.get(label, {})) == {"stub", "solution"}, f"{label}: a stub and a solution cell"


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_the_worked_solution_passes_and_the_stub_says_it_is_not_written(label, capsys):
    assert verdict(label, _run(*CELLS[label]["solution"])) is None
    message = verdict(label, _run(*CELLS[label]["stub"]))
    assert message.startswith("not written yet"), message
    assert "✗" in capsys.readouterr().out  # the stub's own cell printed the verdict, and did not raise


def _causal(T, diagonal=0, upper=False):
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.triu(diagonal) if upper else ones.tril(diagonal)


def _scores(q, k):
    return q @ k.transpose(-2, -1) / k.size(-1) ** 0.5


def _unweighted(words):
    """Each pair counted once per word, whatever the word's count."""
    pairs = Counter(p for w in words for p in zip(w, w[1:]))
    pair = min(pairs, key=lambda p: (-pairs[p], p))
    return pair, _merged(words, pair)


def _merged(words, pair):
    return {tuple(bertgpt.tokenizer.merge_pair(list(w), pair, "".join(pair))): n for w, n in words.items()}


def _first_only_merge(words):
    pair, _ = bertgpt.exercises.merge_step(words)
    return pair, {tuple(bertgpt.exercises._merge_first(list(w), pair)): n for w, n in words.items()}


def _tie_to_last(words):
    counts = bertgpt.exercises._pair_counts(words)
    pair = max(counts, key=lambda p: (counts[p], p))
    return pair, _merged(words, pair)


def _mask_every_token(ids, rate, mask_id, n_special, vocab_size):
    """The 80/10/10 rule drawn for every token, not for the chosen ones."""
    chosen = (torch.rand(ids.shape) < rate) & (ids >= n_special)
    action, inputs = torch.rand(ids.shape), ids.clone()
    inputs[action < 0.8] = mask_id
    return inputs, torch.where(chosen, ids, IGNORE)


def _mask_all_chosen(ids, rate, mask_id, n_special, vocab_size):
    chosen = (torch.rand(ids.shape) < rate) & (ids >= n_special)
    return ids.masked_fill(chosen, mask_id), torch.where(chosen, ids, IGNORE)


def _label_everything(ids, rate, mask_id, n_special, vocab_size):
    chosen = (torch.rand(ids.shape) < rate) & (ids >= n_special)
    return ids.masked_fill(chosen, mask_id), ids.clone()


def _mask_specials(ids, rate, mask_id, n_special, vocab_size):
    chosen = torch.rand(ids.shape) < rate
    action, inputs = torch.rand(ids.shape), ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[random] = torch.randint(n_special, vocab_size, (int(random.sum()),))
    return inputs, torch.where(chosen, ids, IGNORE)


def _post_ln(x, b):
    h = b.ln1(x + b.attn(x)[0])
    return b.ln2(h + b.mlp(h))


WRONG = [  # (exercise, a typical wrong answer, words the message must contain)
    ("ex-02-bpe-merge", _first_only_merge, "only the first occurrence"),
    ("ex-02-bpe-merge", _tie_to_last, "break a tie"),
    ("ex-02-bpe-merge", _unweighted, "the most distinct words"),
    ("ex-02-causal-mask", lambda T: _causal(T, -1), "may not read itself"),
    ("ex-02-causal-mask", lambda T: _causal(T, 1), "position 0 reads position 1"),
    ("ex-02-causal-mask", lambda T: _causal(T, upper=True), "which comes after it"),
    ("ex-02-causal-mask", lambda T: _causal(T).float(), "return booleans"),
    ("ex-02-causal-mask", lambda T: _causal(T + 1), "should be"),
    ("ex-02-attention", lambda q, k, v, m=None: (q @ k.transpose(-2, -1)).masked_fill(
        ~m if m is not None else torch.zeros((), dtype=torch.bool), float("-inf")).softmax(-1) @ v,
     "not divided by √d_h"),
    ("ex-02-attention", lambda q, k, v, m=None: (_scores(q, k) if m is None else _scores(q, k).masked_fill(
        ~m, float("-inf"))).softmax(-2) @ v, "runs over the queries"),
    ("ex-02-attention", lambda q, k, v, m=None: _scores(q, k).softmax(-1) @ v, "the mask is ignored"),
    ("ex-02-attention", lambda q, k, v, m=None: (_scores(q, k) if m is None else _scores(q, k).masked_fill(
        ~m, 0.0)).softmax(-1) @ v, "set to 0"),
    ("ex-02-attention", lambda q, k, v, m=None: (_scores(q, k) if m is None else _scores(q, k).masked_fill(
        m, float("-inf"))).softmax(-1) @ v, "read backwards"),
    ("ex-02-split-heads", lambda x, n: x.reshape(x.size(0), n, x.size(1), -1), "view as (B, T, n_head, hs)"),
    ("ex-02-split-heads", lambda x, n: x.view(x.size(0), x.size(1), -1, n).permute(0, 3, 1, 2),
     "every n_head-th coordinate"),
    ("ex-02-pre-ln", _post_ln, "post-LN"),
    ("ex-02-pre-ln", lambda x, b: b.mlp(b.ln2(b.attn(b.ln1(x))[0])), "residual add is missing"),
    ("ex-02-pre-ln", lambda x, b: (h := x + b.attn(b.ln1(x))[0]) + b.mlp(b.ln1(h)), "block.ln2"),
    ("ex-02-pre-ln", lambda x, b: x + b.attn(b.ln1(x)), "raised TypeError"),  # attn's tuple, added
    ("ex-03-last-token", lambda h, m: h[:, 0], "position 0"),
    ("ex-03-last-token", lambda h, m: h[:, -1], "which is padding"),
    ("ex-03-last-token", lambda h, m: (h * m[..., None]).sum(1) / m.sum(1, keepdim=True), "averaged"),
    ("ex-03-gpt1-loss", lambda c, y, lm, t, lam: lam * F.cross_entropy(c, y) + F.cross_entropy(
        lm.flatten(0, 1), t.flatten()), "λ weights the language-model loss"),
    ("ex-03-gpt1-loss", lambda c, y, lm, t, lam: F.cross_entropy(c, y), "language-model loss is missing"),
    ("ex-04-mask-tokens", _mask_every_token, "only to the chosen"),
    ("ex-04-mask-tokens", _mask_all_chosen, "every chosen token became [MASK]"),
    ("ex-04-mask-tokens", _label_everything, "otherwise the loss counts positions"),
    ("ex-04-mask-tokens", _mask_specials, "a special token was chosen"),
    ("ex-04-mlm-loss", lambda lg, ids, ch: F.cross_entropy(lg.flatten(0, 1), ids.flatten()),
     "counts positions that were not chosen"),
    ("ex-04-mlm-loss", lambda lg, ids, ch: F.cross_entropy(lg.flatten(0, 1), ids.flatten(), reduction="none")[
        ch.flatten()].sum() / ids.numel(), "divided by every position"),
    ("ex-04-cls-head", lambda h, dense, clf: clf(torch.tanh(dense(h[:, -1]))), "reads position 0"),
    ("ex-04-cls-head", lambda h, dense, clf: clf(dense(h[:, 0])), "through tanh"),
    ("ex-09-rtd-targets", lambda o, c, ch, m: (c == o).float().masked_fill(m == 0, -1.0), "originals with 1"),
    ("ex-09-rtd-targets", lambda o, c, ch, m: ch.float().masked_fill(m == 0, -1.0), "every chosen position"),
    ("ex-09-rtd-targets", lambda o, c, ch, m: (c != o).float(), "padding should be -1"),
]


@pytest.mark.parametrize("label,wrong,words", WRONG, ids=[f"{w[0]}:{w[2][:24]}" for w in WRONG])
def test_a_typical_wrong_answer_fails_with_the_message_that_names_it(label, wrong, words):
    torch.manual_seed(0)
    message = verdict(label, wrong)
    assert message is not None and words in message, message


def test_check_prints_its_verdict_wrapped_and_refuses_what_is_not_an_exercise(capsys):
    check("ex-02-causal-mask", bertgpt.exercises.causal_mask)
    assert capsys.readouterr().out.startswith("✓ ex-02-causal-mask")
    check("ex-02-causal-mask", lambda T: torch.ones(T, T, dtype=torch.bool))
    printed = capsys.readouterr().out
    assert " ".join(printed.split()).startswith("✗ ex-02-causal-mask: position 0 reads position 1")
    assert max(map(len, printed.splitlines())) <= 79  # the width of a notebook's output
    assert "pass the function itself" in verdict("ex-02-causal-mask", _causal(3))
    with pytest.raises(ValueError, match="the checked exercises are"):
        check("ex-02-no-such-thing", print)
