"""Checks for the implement-it exercises: the learner writes a piece of a model, :func:`check` judges it.

::

    def causal_mask(T): ...                          # the learner's function
    bertgpt.check("ex-02-causal-mask", causal_mask)  # ✓, or what differs, in words to act on

Each check calls the learner's function on random inputs and compares what it returns with the
package's own computation. Where the two differ, it tells apart the mistakes people make (a mask
shifted by one, a softmax over the wrong axis, the 80/10/10 rule applied to every token) and names
the one it found; otherwise it says where the two first differ. It prints its verdict: a wrong
answer is the learner's to fix, never an exception from inside the package. :func:`verdict` gives
the message alone (None when the function passes), for tests.
"""

from __future__ import annotations

import dataclasses
import math
import random
import textwrap
from collections import Counter
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .config import model_config
from .finetune import last_token_states
from .inputs import IGNORE
from .model import Block, build, causal_mask, pooler
from .objectives import rtd_targets
from .tokenizer import SPECIAL_TOKENS, merge_pair

EXERCISES: dict[str, tuple[str, Callable]] = {}  #: exercise label -> (what a pass says, its judge)


class NotWritten(Exception):
    """The learner's function is still the stub: it raised NotImplementedError or returned nothing."""


def exercise(label: str, passed: str):
    """Register a judge (a function of the learner's function that returns what is wrong, or None) and
    what a pass says ("your " + ``passed``)."""
    def register(judge: Callable) -> Callable:
        EXERCISES[label] = (passed, judge)
        return judge
    return register


def _call(fn: Callable, *args):
    """``fn(*args)``, with a stub's NotImplementedError or None turned into :class:`NotWritten`."""
    try:
        out = fn(*args)
    except NotImplementedError:
        raise NotWritten from None
    if out is None:
        raise NotWritten
    return out


def _first_difference(yours: torch.Tensor, ours: torch.Tensor, what: str, atol: float = 1e-5) -> str | None:
    """None when the two tensors agree; otherwise where they first differ, in words."""
    if not isinstance(yours, torch.Tensor):
        return f"{what} should be a torch tensor, not {type(yours).__name__}"
    if yours.shape != ours.shape:
        return f"{what} should have shape {tuple(ours.shape)}, yours has {tuple(yours.shape)}"
    if yours.dtype == torch.bool or ours.dtype == torch.bool:
        far = yours != ours
    else:
        far = ~torch.isclose(yours.float(), ours.float(), atol=atol, rtol=1e-4)
    if not far.any():
        return None
    at = tuple(int(i) for i in far.nonzero()[0])
    return f"{what} differs at index {at}: {yours[at].item():.4g} where {ours[at].item():.4g} is expected"


def _matches(yours, ours: torch.Tensor) -> bool:
    return _first_difference(yours, ours, "") is None


def verdict(label: str, fn: Callable) -> str | None:
    """What is wrong with ``fn`` as an answer to exercise ``label``, or None when it passes."""
    if label not in EXERCISES:
        raise ValueError(f"no exercise {label!r}: the checked exercises are {', '.join(EXERCISES)}")
    if not callable(fn):
        return f"pass the function itself, not {type(fn).__name__}: check({label!r}, your_function)"
    try:
        return EXERCISES[label][1](fn)
    except NotWritten:
        return (f"not written yet: {getattr(fn, '__name__', 'the function')} still raises "
                "NotImplementedError or returns nothing. Write its body, then run this cell again")
    except Exception as error:  # the learner's code failed: say how, without the package's traceback
        return f"your function raised {type(error).__name__}: {error}"


def check(label: str, fn: Callable) -> None:
    """Judge the learner's ``fn`` for exercise ``label``: print ✓, or ✗ and what to fix, wrapped to the
    width of a notebook's output. (It returns nothing, so that a cell ending with it shows only the
    verdict; :func:`verdict` gives the message to code.)"""
    problem = verdict(label, fn)
    text = f"✓ {label}: your {EXERCISES[label][0]}" if problem is None else f"✗ {label}: {problem}"
    print(textwrap.fill(text, width=79, subsequent_indent="  "))


# Tokenization -------------------------------------------------------------------------------------------

def merge_step(words: dict[tuple[str, ...], int]):
    """One byte-pair merge: the most frequent adjacent pair (each word counted as often as it occurs;
    a tie goes to the pair that sorts first) and the words with every occurrence of it merged, left
    to right. The rule of :func:`bertgpt.tokenizer.learn_merges`."""
    counts = _pair_counts(words)
    pair = min(counts, key=lambda p: (-counts[p], p))
    return pair, {tuple(merge_pair(list(w), pair, "".join(pair))): n for w, n in words.items()}


def _pair_counts(words, weighted: bool = True) -> Counter:
    counts = Counter()
    for w, n in words.items():
        for pair in zip(w, w[1:]):
            counts[pair] += n if weighted else 1
    return counts


def _merge_cases() -> list[dict]:
    rng = random.Random(0)
    toy = {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3, tuple("aaab"): 1}
    cases = [toy, {tuple("aaa"): 4, tuple("ab"): 3}, {tuple("ab"): 1, tuple("cd"): 3, tuple("abab"): 1},
             {tuple("xy"): 10, tuple("abc"): 1, tuple("abd"): 1}]
    for _ in range(20):
        cases.append({tuple(rng.choice("abc") for _ in range(rng.randint(2, 6))): rng.randint(1, 9)
                      for _ in range(6)})
    return cases


@exercise("ex-02-bpe-merge", "merge agrees with the package's rule")
def _judge_merge(fn):
    for words in _merge_cases():
        out = _call(fn, dict(words))
        if not (isinstance(out, tuple) and len(out) == 2):
            return "return two things, (pair, words): the pair merged, and the words after the merge"
        pair, merged = out
        best, expected = merge_step(words)
        counts = _pair_counts(words)
        if tuple(pair) != best:
            plain = _pair_counts(words, weighted=False)
            by_words = min(plain, key=lambda p: (-plain[p], p))
            if tuple(pair) == by_words and counts[tuple(pair)] < counts[best]:
                return (f"you picked {tuple(pair)}, the pair found in the most distinct words; count "
                        f"each pair as often as its word occurs: {best} occurs {counts[best]} times")
            if counts.get(tuple(pair)) == counts[best]:
                return (f"{tuple(pair)} and {best} both occur {counts[best]} times: break a tie by taking "
                        "the pair that sorts first, min() of the tied pairs")
            return f"the most frequent pair is {best} ({counts[best]} times), not {pair}"
        problem = _judge_merged(words, pair, dict(merged), expected)
        if problem:
            return problem
    return None


def _judge_merged(words, pair, merged, expected) -> str | None:
    if set(merged.values()) != set(expected.values()) or len(merged) != len(expected):
        return "every word keeps its count: the merge changes how words are split, not how often they occur"
    for word in words:
        ours = next(w for w, m in expected.items() if "".join(w) == "".join(word))
        yours = [w for w in merged if "".join(w) == "".join(word)]
        if not yours:
            return (f"no word of yours spells {''.join(word)!r}: a merge joins neighbours, and keeps every "
                    "letter")
        if tuple(yours[0]) != ours:
            first_only = tuple(_merge_first(list(word), pair))
            why = (" you merged only the first occurrence: merge every one, left to right"
                   if tuple(yours[0]) == first_only and first_only != ours else "")
            return f"after merging {pair}, {word} should read {ours}, yours reads {tuple(yours[0])};{why}"
    return None


def _merge_first(pieces, pair):
    for j in range(len(pieces) - 1):
        if (pieces[j], pieces[j + 1]) == pair:
            return pieces[:j] + ["".join(pair)] + pieces[j + 2:]
    return pieces


# Chapter 2: attention and the block ------------------------------------------------------------------

@exercise("ex-02-causal-mask", "causal mask agrees with the package's")
def _judge_causal_mask(fn):
    for T in (1, 5, 8):
        yours, ours = _call(fn, T), causal_mask(T)
        if not isinstance(yours, torch.Tensor):
            return f"return a torch tensor, not {type(yours).__name__}"
        if yours.shape != ours.shape:
            return f"for T = {T} the mask should be ({T}, {T}), yours is {tuple(yours.shape)}"
        if yours.dtype != torch.bool:
            return f"return booleans (True where a query may read a key), not {yours.dtype}"
        extra, missing = (yours & ~ours).nonzero(), (ours & ~yours).nonzero()
        if len(extra):
            i, j = (int(v) for v in extra[0])
            return (f"position {i} reads position {j}, which comes after it: the future must be hidden "
                    "(True only where key j <= query i, on and below the diagonal)")
        if len(missing):
            i, j = (int(v) for v in missing[0])
            if i == j:
                return (f"position {i} may not read itself: a position reads itself and the past, so the "
                        "diagonal is True")
            return f"position {i} cannot read position {j}, which comes before it"
    return None


def attention(q, k, v, mask=None) -> torch.Tensor:
    """Scaled dot-product attention, (..., T, d_h), as the model computes it: softmax(q k^T / sqrt(d_h))
    v over the keys, where ``mask`` (T, T) is True."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


ATTENTION_MISTAKES = (  # what a mistaken attention computes, and what to say about it
    ("the scores are not divided by √d_h: divide q·k by the head's width's square root before the softmax",
     lambda q, k, v, m: attention(q * math.sqrt(k.size(-1)), k, v, m)),
    ("the softmax runs over the queries: each query's weights must sum to 1 over the keys (the last "
     "axis, dim=-1)",
     lambda q, k, v, m: (q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))).masked_fill(
         ~m, float("-inf")).softmax(-2).nan_to_num() @ v),
    ("the mask is ignored: where it is False, set the score to -inf before the softmax",
     lambda q, k, v, m: attention(q, k, v, None)),
    ("masked scores set to 0 still get weight (exp 0 = 1): set them to -inf instead",
     lambda q, k, v, m: (q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))).masked_fill(
         ~m, 0.0).softmax(-1) @ v),
)


@exercise("ex-02-attention", "attention agrees with the package's")
def _judge_attention(fn):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 16, generator=g) for _ in range(3))  # (B, nh, T, d_h)
    mask = causal_mask(6)
    for m in (mask, None):
        yours, ours = _call(fn, q, k, v, m), attention(q, k, v, m)
        if isinstance(yours, torch.Tensor) and yours.isnan().any():
            return ("some outputs are NaN: a query whose every key is masked has nothing to read. Is the "
                    "mask read backwards? True marks a key the query may read")
        if _matches(yours, ours):
            continue
        for message, mistaken in ATTENTION_MISTAKES:
            if m is not None and _matches(yours, mistaken(q, k, v, m)):
                return message
        if m is None:
            return "with mask=None every query reads every key: skip the masking step"
        return _first_difference(yours, ours, "the output (B, n_head, T, d_h)")
    return None


def split_heads(x: torch.Tensor, n_head: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_head, T, d // n_head): head h holds coordinates h*hs ... (h+1)*hs - 1."""
    B, T, d = x.shape
    return x.view(B, T, n_head, d // n_head).transpose(1, 2)


@exercise("ex-02-split-heads", "split agrees with the package's")
def _judge_split_heads(fn):
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(0))
    for n_head in (3, 4):
        yours, ours = _call(fn, x, n_head), split_heads(x, n_head)
        if _matches(yours, ours):
            continue
        hs = 12 // n_head
        if _matches(yours, x.reshape(2, n_head, 5, hs)):
            return ("you reshaped straight to (B, n_head, T, hs), which spreads one position over several "
                    "heads: view as (B, T, n_head, hs) first, then swap the T and n_head axes")
        if _matches(yours, x.view(2, 5, hs, n_head).permute(0, 3, 1, 2)):
            return ("head h took every n_head-th coordinate: each head takes a contiguous slice, "
                    "coordinates h·hs to (h+1)·hs - 1")
        return _first_difference(yours, ours, f"the split of (2, 5, 12) into {n_head} heads")
    return None


def _pre_ln_block() -> Block:
    cfg = dataclasses.replace(model_config("tiny", "gpt"), norm="pre", dropout=0.0)
    torch.manual_seed(0)
    block = Block(cfg, 0).eval()
    for ln in (block.ln1, block.ln2):  # LayerNorms that do something, so that a swapped one shows
        torch.nn.init.normal_(ln.weight, 1.0, 0.3)
        torch.nn.init.normal_(ln.bias, 0.0, 0.3)
    return block


def pre_ln_block(x: torch.Tensor, block: Block) -> torch.Tensor:
    """A pre-LN block's output: x + attention(LN1(x)), then + feed-forward(LN2(.))."""
    x = x + block.attn(block.ln1(x))[0]
    return x + block.mlp(block.ln2(x))


BLOCK_MISTAKES = (
    ("you normalised after the residual add, the 2018 post-LN order: a pre-LN block normalises the "
     "branch's input, x + attn(ln1(x)), and leaves the residual path alone",
     lambda x, b: b.ln2((h := b.ln1(x + b.attn(x)[0])) + b.mlp(h))),
    ("a residual add is missing: each branch's output is added to its input, x + attn(ln1(x))",
     lambda x, b: b.mlp(b.ln2(b.attn(b.ln1(x))[0]))),
    ("you normalised the branch's output: pre-LN normalises its input, x + attn(ln1(x))",
     lambda x, b: (h := x + b.ln1(b.attn(x)[0])) + b.ln2(b.mlp(h))),
    ("the feed-forward branch has its own LayerNorm, block.ln2, not ln1",
     lambda x, b: (h := x + b.attn(b.ln1(x))[0]) + b.mlp(b.ln1(h))),
)


@exercise("ex-02-pre-ln", "block agrees with the package's Block")
def _judge_pre_ln(fn):
    block = _pre_ln_block()
    x = torch.randn(2, 6, block.ln1.normalized_shape[0], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        yours, ours = _call(fn, x, block), block(x)[0]
        if _matches(yours, ours):
            return None
        for message, mistaken in BLOCK_MISTAKES:
            if _matches(yours, mistaken(x, block)):
                return message
    return _first_difference(yours, ours, "the block's output (B, T, d)")


# Chapter 3: GPT-1's fine-tuning ------------------------------------------------------------------------

def _padded_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(4, 7, 8, generator=g)
    lengths = torch.tensor([7, 3, 5, 1])
    return hidden, (torch.arange(7)[None] < lengths[:, None]).long()


@exercise("ex-03-last-token", "summary agrees with the package's classifier")
def _judge_last_token(fn):
    hidden, pad_mask = _padded_batch()
    yours, ours = _call(fn, hidden, pad_mask), last_token_states(hidden, pad_mask)
    if _matches(yours, ours):
        return None
    rows = torch.arange(4)
    if _matches(yours, hidden[:, 0]):
        return ("you read position 0, the first token: GPT-1's classifier reads the last real token "
                "([EXTRACT]), the only position that has seen the whole input")
    if _matches(yours, hidden[:, -1]):
        return ("you read the last position, which is padding in the rows shorter than the batch: read "
                "position pad_mask.sum(1) - 1 of each row")
    if _matches(yours, hidden[rows, (pad_mask.sum(1)).clamp(max=6)]):
        return "one position too far: the last real token of a row is at pad_mask.sum(1) - 1"
    if _matches(yours, (hidden * pad_mask[..., None]).sum(1) / pad_mask.sum(1, keepdim=True)):
        return "you averaged the real tokens' states: GPT-1 reads the state at the last real token only"
    return _first_difference(yours, ours, "the states (B, d)")


def gpt1_loss(class_logits, labels, lm_logits, lm_targets, lam: float) -> torch.Tensor:
    """GPT-1's fine-tuning loss L3 = L2 + λ·L1: the task's cross-entropy plus λ times the language
    model's, averaged over the positions whose target is not ``IGNORE``."""
    task = F.cross_entropy(class_logits, labels)
    lm = F.cross_entropy(lm_logits.flatten(0, 1), lm_targets.flatten(), ignore_index=IGNORE)
    return task + lam * lm


@exercise("ex-03-gpt1-loss", "loss agrees with the package's L3")
def _judge_gpt1_loss(fn):
    g = torch.Generator().manual_seed(0)
    class_logits, labels = torch.randn(4, 3, generator=g), torch.tensor([0, 2, 1, 2])
    lm_logits = torch.randn(4, 6, 11, generator=g)
    lm_targets = torch.randint(0, 11, (4, 6), generator=g)
    lm_targets[:, 4:] = IGNORE  # padding: no next token to predict
    task = F.cross_entropy(class_logits, labels)
    lm = F.cross_entropy(lm_logits.flatten(0, 1), lm_targets.flatten(), ignore_index=IGNORE)
    for lam in (0.5, 0.0, 2.0):
        yours = _call(fn, class_logits, labels, lm_logits, lm_targets, lam)
        ours = task + lam * lm
        if not isinstance(yours, torch.Tensor) or yours.numel() != 1:
            return "return one number, a tensor with a single element: the loss averaged over the batch"
        if _matches(yours.reshape(()), ours):
            continue
        if _matches(yours.reshape(()), lam * task + lm):
            return "λ weights the language-model loss, not the task's: L3 = L2 + λ·L1"
        if _matches(yours.reshape(()), task):
            return "the auxiliary language-model loss is missing: add λ times its cross-entropy"
        if lam and _matches(yours.reshape(()), lm * lam):
            return "the task's loss is missing: L3 = L2 (the task) + λ·L1 (the language model)"
        return f"with λ = {lam} the loss should be {ours.item():.4f}, yours is {yours.item():.4f}"
    return None


TOY_VOCAB = 16  # the loop exercise's toy language: its tokens,
LOOP_STEPS = 200  # the updates the learner's loop gets,
LOOP_TARGET = 0.5  # and the loss on fresh batches it must get under


def toy_batches(seed: int, batch_size: int = 32, length: int = 16):
    """Endless (x, y) batches of a toy language in which each token decides the next, (5t + 3) mod 16:
    a loss near 0 is within reach of a tiny GPT in a few hundred updates."""
    g = torch.Generator().manual_seed(seed)
    while True:
        seq = [torch.randint(TOY_VOCAB, (batch_size, 1), generator=g)]
        for _ in range(length):
            seq.append((seq[-1] * 5 + 3) % TOY_VOCAB)
        window = torch.cat(seq, 1)  # (B, T + 1)
        yield window[:, :-1], window[:, 1:]


def _toy_gpt():
    cfg = dataclasses.replace(model_config("tiny", "gpt"), vocab_size=TOY_VOCAB, context=16, dropout=0.0)
    torch.manual_seed(0)
    return build(cfg)


@exercise("ex-03-train-loop", f"loop brings a tiny GPT under {LOOP_TARGET} in {LOOP_STEPS} updates")
def _judge_train_loop(fn):
    model = _toy_gpt()
    before = [p.detach().clone() for p in model.parameters()]
    losses = _call(fn, model, toy_batches(0), LOOP_STEPS)
    if not (isinstance(losses, list | tuple) and len(losses) == LOOP_STEPS):
        return f"return the loss of each update: a list of {LOOP_STEPS} numbers"
    if all(torch.equal(a, b) for a, b in zip(before, model.parameters())):
        return "no weight changed: after loss.backward(), call the optimizer's step()"
    model.eval()
    with torch.no_grad():
        x, y = next(toy_batches(1))  # batches the loop never saw
        loss = F.cross_entropy(model(x).logits.flatten(0, 1), y.flatten()).item()
    if not math.isfinite(loss):
        return "the loss is not a number any more: lower the learning rate, or clip the gradients"
    if loss > LOOP_TARGET:
        return (f"after {LOOP_STEPS} updates the loss on fresh batches is {loss:.2f}, above {LOOP_TARGET}: "
                "does zero_grad() run at every update? Try a learning rate near 1e-3")
    return None


# Chapter 4: BERT's masked LM and its [CLS] head ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MaskSetting:
    """The token ids a learner's ``mask_tokens`` needs, numbered as the course's tokenizers number them."""
    mask_id: int = SPECIAL_TOKENS.index("[MASK]")
    n_special: int = len(SPECIAL_TOKENS)  #: ids below this are special ([PAD], [CLS], ...), never chosen
    vocab_size: int = 4096


def _masking_batch(setting: MaskSetting):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(setting.n_special, setting.vocab_size, (200, 128), generator=g)
    ids[:, 0], ids[:, 63] = SPECIAL_TOKENS.index("[CLS]"), SPECIAL_TOKENS.index("[SEP]")
    ids[::3, 100:] = SPECIAL_TOKENS.index("[PAD]")  # padding at the end of every third row
    return ids


def _fates(ids, inputs, labels, setting):
    chosen = labels != IGNORE
    return dict(chosen=chosen, masked=chosen & (inputs == setting.mask_id),
                random=chosen & (inputs != setting.mask_id) & (inputs != ids), kept=chosen & (inputs == ids))


@exercise("ex-04-mask-tokens", "masking follows BERT's rule at its rates")
def _judge_mask_tokens(fn):
    s = MaskSetting()
    ids = _masking_batch(s)
    out = _call(fn, ids.clone(), 0.15, s.mask_id, s.n_special, s.vocab_size)
    if not (isinstance(out, tuple) and len(out) == 2):
        return "return two tensors, (inputs, labels)"
    inputs, labels = out
    for name, t in (("inputs", inputs), ("labels", labels)):
        if not isinstance(t, torch.Tensor) or t.shape != ids.shape:
            return f"{name} should be a tensor of the ids' shape {tuple(ids.shape)}"
    ordinary, fate = ids >= s.n_special, _fates(ids, inputs, labels, s)
    if (labels != IGNORE).all():
        return ("labels must be IGNORE (-100) where a token was not chosen: otherwise the loss counts "
                "positions the model can read")
    if (fate["chosen"] & ~ordinary).any():
        return ("a special token was chosen ([CLS], [SEP], padding: ids below n_special): choose ordinary "
                "tokens only")
    if (labels[fate["chosen"]] != ids[fate["chosen"]]).any():
        return "where a token was chosen, its label is the original token (ids), whatever the input became"
    if (inputs[~fate["chosen"]] != ids[~fate["chosen"]]).any():
        return ("positions that were not chosen changed: the 80/10/10 rule applies only to the chosen "
                "15%, every other input stays as it was")
    return _judge_mask_rates(fate, ordinary, inputs, s)


def _judge_mask_rates(fate, ordinary, inputs, s) -> str | None:
    rate = float(fate["chosen"].sum() / ordinary.sum())
    if abs(rate - 0.15) > 0.01:
        return f"{100 * rate:.1f}% of the ordinary tokens were chosen, not 15%"
    n = fate["chosen"].sum()
    share = {k: float(fate[k].sum() / n) for k in ("masked", "random", "kept")}
    if share["masked"] > 0.95:
        return "every chosen token became [MASK]: 10% should become a random token and 10% stay as they are"
    if share["kept"] < 0.05:
        return ("no chosen token stayed as it was (the 10% kept): of the chosen, 80% [MASK], 10% random, "
                "10% kept")
    if share["random"] < 0.05:
        return "no chosen token became a random token: of the chosen, 80% [MASK], 10% random, 10% kept"
    if (inputs[fate["random"]] < s.n_special).any():
        return "a random replacement was a special token: draw it from n_special to vocab_size - 1"
    for k, target in (("masked", 0.8), ("random", 0.1), ("kept", 0.1)):
        if abs(share[k] - target) > 0.03:
            return f"of the chosen tokens {100 * share[k]:.1f}% were {k}, not {100 * target:.0f}%"
    return None


def mlm_loss(logits: torch.Tensor, ids: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss: the mean cross-entropy of the original ``ids`` at the ``chosen`` positions
    only. ``logits`` (B, T, V), ``ids`` and ``chosen`` (B, T)."""
    return F.cross_entropy(logits[chosen], ids[chosen])


@exercise("ex-04-mlm-loss", "loss agrees with the package's")
def _judge_mlm_loss(fn):
    g = torch.Generator().manual_seed(0)
    logits, ids = torch.randn(3, 10, 17, generator=g), torch.randint(0, 17, (3, 10), generator=g)
    chosen = torch.rand(3, 10, generator=g) < 0.3
    chosen[:, 0] = True
    yours, ours = _call(fn, logits, ids, chosen), mlm_loss(logits, ids, chosen)
    if not isinstance(yours, torch.Tensor) or yours.numel() != 1:
        return "return one number, a tensor with a single element: the mean over the chosen positions"
    yours = yours.reshape(())
    if _matches(yours, ours):
        return None
    every = F.cross_entropy(logits.flatten(0, 1), ids.flatten(), reduction="none")
    if _matches(yours, every.mean()):
        return ("the loss counts positions that were not chosen: the model reads those tokens in its input, "
                "so score only where chosen is True")
    if _matches(yours, (every * chosen.flatten()).sum() / every.numel()):
        return "you divided by every position: average over the chosen positions only"
    if _matches(yours, every[chosen.flatten()].sum()):
        return "that is the sum: average over the chosen positions"
    return f"the loss should be {ours.item():.4f}, yours is {yours.item():.4f}"


def cls_head(hidden: torch.Tensor, dense: torch.nn.Linear, classifier: torch.nn.Linear) -> torch.Tensor:
    """BERT's sentence classifier: the [CLS] state (position 0) through the pooler (``dense``, then tanh)
    and the ``classifier``: (B, T, d) -> (B, n_classes)."""
    return classifier(torch.tanh(dense(hidden[:, 0])))


@exercise("ex-04-cls-head", "head agrees with the package's pooler and classifier")
def _judge_cls_head(fn):
    torch.manual_seed(0)
    dense, classifier = pooler(8)[0], torch.nn.Linear(8, 3)
    hidden = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        yours, ours = _call(fn, hidden, dense, classifier), cls_head(hidden, dense, classifier)
        if _matches(yours, ours):
            return None
        if _matches(yours, classifier(torch.tanh(dense(hidden[:, -1])))):
            return "you read the last position: BERT's head reads position 0, the [CLS] token"
        if _matches(yours, classifier(dense(hidden[:, 0]))):
            return "the pooler passes the dense layer's output through tanh before the classifier"
        if _matches(yours, classifier(torch.tanh(dense(hidden.mean(1))))):
            return "you averaged every position: BERT's head reads the [CLS] state, position 0"
    return _first_difference(yours, ours, "the class logits (B, n_classes)")


@exercise("ex-09-rtd-targets", "targets agree with ELECTRA's")
def _judge_rtd_targets(fn):
    g = torch.Generator().manual_seed(0)
    original = torch.randint(5, 12, (4, 10), generator=g)
    chosen = torch.rand(4, 10, generator=g) < 0.4
    corrupted = torch.where(chosen, torch.randint(5, 12, (4, 10), generator=g), original)
    pad_mask = torch.ones(4, 10, dtype=torch.long)
    pad_mask[1:, 7:] = 0
    chosen &= pad_mask == 1
    assert (chosen & (corrupted == original)).any()  # some samples drew the original back
    yours = _call(fn, original, corrupted, chosen, pad_mask)
    ours = rtd_targets(original, corrupted, pad_mask)  # the package's own, which needs no chosen
    if _matches(yours, ours):
        return None
    padded = pad_mask == 0
    if _matches(yours, (corrupted == original).float().masked_fill(padded, -1.0)):
        return "you marked the originals with 1: the target is 1 where the token was replaced"
    if _matches(yours, chosen.float().masked_fill(padded, -1.0)):
        return ("you marked every chosen position: where the generator's sample is the original token, "
                "nothing was replaced, and ELECTRA counts that token as original")
    if _matches(yours, (corrupted != original).float()):
        return "padding should be -1, so that the loss skips it: no token sits there"
    return _first_difference(yours, ours, "the targets (B, T)")
