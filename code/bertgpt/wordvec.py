r"""Static word vectors: skip-gram with negative sampling (word2vec), small enough to train on a CPU.

Skip-gram (Mikolov et al., 2013a) gives every word ``w`` two vectors, an input vector
:math:`v_w` and an output vector :math:`u_w`. For a centre word ``c`` and a word ``o`` seen within
``window`` words of it, negative sampling (Mikolov et al., 2013b) maximises

.. math::

    \log \sigma(u_o^\top v_c) + \sum_{k=1}^{K} \log \sigma(-u_{n_k}^\top v_c),
    \qquad n_k \sim P_n(w) \propto f(w)^{3/4},

that is, a logistic regression that tells the real context word from ``K = negatives`` words drawn
from the unigram distribution raised to the power 3/4. Words that share contexts are pushed towards
the same output vectors and so end up with similar input vectors; the input vectors are the word
vectors. Every word gets exactly one vector, whatever sentence it stands in.

Two details from the papers are kept:

- subsampling of frequent words: each occurrence of a word with relative frequency ``f`` is dropped
  with probability ``1 - sqrt(t / f)`` (``t = subsample``), so "the" and "of" stop dominating the
  pairs and the effective window grows;
- a dynamic window: for every centre word the window size is drawn uniformly from 1 to ``window``,
  so near neighbours count more than far ones.

Training is plain stochastic gradient ascent written out by hand, as in the reference code: each
step reads and updates only the rows of the words in its batch (``index_add_``), with a learning
rate that falls linearly to zero. On two CPU cores a pass over the State of the Union addresses
takes well under a minute::

    wv = train_word_vectors(load_corpus(), dim=64, epochs=2)
    wv.most_similar("war", k=5)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .corpus import Corpus

WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``: runs of letters, with an inner apostrophe kept ("nation's")."""
    return WORD.findall(text.lower())


class WordVectors:
    """One vector per word of a vocabulary, with cosine-similarity look-ups."""

    def __init__(self, vocab: list[str], vectors: torch.Tensor, counts: list[int]):
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.vectors = vectors.detach().float()  # (V, dim)
        self.counts = list(counts)
        self._unit = F.normalize(self.vectors, dim=1)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __len__(self) -> int:
        return len(self.vocab)

    def vector(self, word: str) -> torch.Tensor:
        """The vector of ``word`` (dim,); a ``KeyError`` names the word if it is not in the vocabulary."""
        if word not in self.index:
            raise KeyError(f"{word!r} is not in the vocabulary (too rare, or never seen)")
        return self.vectors[self.index[word]]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words' vectors."""
        return float(F.cosine_similarity(self.vector(a), self.vector(b), dim=0))

    def most_similar(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` words whose vectors have the highest cosine similarity to ``word``'s."""
        sims = self._unit @ F.normalize(self.vector(word), dim=0)
        sims[self.index[word]] = -2.0  # never the word itself
        top = torch.topk(sims, k)
        return [(self.vocab[i], float(s)) for s, i in zip(top.values, top.indices)]

    def __repr__(self):
        return f"WordVectors({len(self)} words, dim={self.vectors.shape[1]})"


def _sentences(source: Corpus | Iterable[str] | Iterable[list[str]]) -> list[list[str]]:
    """Lists of words from a corpus (one per paragraph), strings, or lists of words."""
    if isinstance(source, Corpus):
        return [words(p) for d in source.documents for p in d.paragraphs]
    out = []
    for s in source:
        out.append(words(s) if isinstance(s, str) else [w.lower() for w in s])
    return out


def skipgram_pairs(sentences: list[torch.Tensor], window: int, generator: torch.Generator):
    """(centre, context) id pairs from id tensors, each centre with a window drawn from 1..window."""
    centres, contexts = [], []
    for ids in sentences:
        n = len(ids)
        if n < 2:
            continue
        reach = torch.randint(1, window + 1, (n,), generator=generator)
        for offset in range(1, window + 1):
            if offset >= n:
                break
            keep = reach[:-offset] >= offset  # centre i sees i + offset
            centres.append(ids[:-offset][keep])
            contexts.append(ids[offset:][keep])
            keep = reach[offset:] >= offset  # centre i sees i - offset
            centres.append(ids[offset:][keep])
            contexts.append(ids[:-offset][keep])
    if not centres:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    return torch.cat(centres), torch.cat(contexts)


def _multiplicity(ids: torch.Tensor, n: int) -> torch.Tensor:
    """How often each entry of ``ids`` occurs in ``ids``, as a (len(ids), 1) float column."""
    return torch.bincount(ids, minlength=n)[ids].unsqueeze(-1).float()


@dataclass(frozen=True)
class WordVecConfig:
    """Skip-gram with negative sampling: word2vec's settings, at the course's scale."""

    dim: int = 64             #: length of each word vector
    window: int = 5           #: context words on each side of the centre word
    negatives: int = 5        #: noise words per (centre, context) pair
    epochs: int = 2           #: passes over the text
    min_count: int = 5        #: words seen fewer times are dropped
    subsample: float = 1e-4   #: word2vec's threshold for dropping frequent words; 0 keeps all
    lr: float = 0.1           #: initial learning rate, falling linearly to 0
    batch_size: int = 1024    #: pairs per update
    seed: int = 0             #: initialisation, subsampling, pairs and noise


def train_word_vectors(source: Corpus | Iterable[str] | Iterable[list[str]], cfg: WordVecConfig | None = None,
                       progress: bool = False, **fields) -> WordVectors:
    """Train skip-gram vectors with negative sampling on a corpus, strings, or lists of words.

    ``cfg`` is a :class:`WordVecConfig`; keyword ``fields`` change it (``dim=64, epochs=2``). Words
    seen fewer than ``min_count`` times are dropped before the windows are drawn. Returns the input
    vectors as :class:`WordVectors`. The same ``seed`` gives the same vectors.
    """
    cfg = dataclasses.replace(cfg or WordVecConfig(), **fields)
    sentences = _sentences(source)
    counts = Counter(w for s in sentences for w in s)
    vocab = sorted((w for w, c in counts.items() if c >= cfg.min_count), key=lambda w: (-counts[w], w))
    if not vocab:
        raise ValueError(f"no word occurs {cfg.min_count} times or more: lower min_count")
    index = {w: i for i, w in enumerate(vocab)}
    ids = [torch.tensor([index[w] for w in s if w in index], dtype=torch.long) for s in sentences]
    ids = [s for s in ids if len(s) > 1]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the steps are small: one thread is faster than two that contend
    try:
        return _train(ids, vocab, [counts[w] for w in vocab], cfg, progress)
    finally:
        torch.set_num_threads(threads)


def _train(ids, vocab, counts, cfg: WordVecConfig, progress) -> WordVectors:
    """The training loop of :func:`train_word_vectors`."""
    g = torch.Generator().manual_seed(cfg.seed)
    freq = torch.tensor(counts, dtype=torch.float)
    rel = freq / freq.sum()
    keep_prob = torch.ones_like(rel)
    if cfg.subsample:  # word2vec drops a word with probability 1 - sqrt(t / f)
        keep_prob = torch.clamp(torch.sqrt(cfg.subsample / rel), max=1.0)
    noise = freq.pow(0.75)
    noise /= noise.sum()
    dim, window, negatives, epochs, lr, batch_size = (cfg.dim, cfg.window, cfg.negatives, cfg.epochs, cfg.lr,
                                                      cfg.batch_size)
    V = len(vocab)
    w_in = (torch.rand(V, dim, generator=g) - 0.5) / dim  # v_w: the word vectors
    w_out = torch.zeros(V, dim)                             # u_w: the context vectors
    steps_done, total_steps = 0, None

    for epoch in range(epochs):
        kept = [s[torch.rand(len(s), generator=g) < keep_prob[s]] for s in ids]  # fresh subsample
        centre, context = skipgram_pairs(kept, window, g)
        order = torch.randperm(len(centre), generator=g)
        centre, context = centre[order], context[order]
        n_batches = math.ceil(len(centre) / batch_size)
        total_steps = total_steps or n_batches * epochs  # for the learning-rate schedule
        loss_sum = 0.0
        for b in range(n_batches):
            c = centre[b * batch_size:(b + 1) * batch_size]
            o = context[b * batch_size:(b + 1) * batch_size]
            B = len(c)
            neg = torch.multinomial(noise, B * negatives, replacement=True, generator=g)
            v, u_pos = w_in[c], w_out[o]                              # (B, dim), (B, dim)
            u_neg = w_out[neg].view(B, negatives, dim)                # (B, K, dim)
            s_pos = torch.sigmoid((v * u_pos).sum(-1))                # (B,)   sigma(u_o . v_c)
            s_neg = torch.sigmoid((u_neg @ v.unsqueeze(-1)).squeeze(-1))  # (B, K) sigma(u_n . v_c)
            loss_sum -= float(torch.log(s_pos + 1e-7).mean() + torch.log(1 - s_neg + 1e-7).sum(-1).mean())
            # Gradient ascent on the objective, written out (the derivative of log sigma(x) is
            # 1 - sigma(x)); the learning rate falls linearly to 0, as in the reference code.
            rate = lr * max(1e-4, 1 - steps_done / total_steps)
            g_pos, g_neg = (1 - s_pos).unsqueeze(-1), -s_neg.unsqueeze(-1)  # (B, 1), (B, K, 1)
            grad_v = g_pos * u_pos + (g_neg * u_neg).sum(1)           # (B, dim)
            # A word that occurs m times in a batch gets the mean of its m updates, not their sum,
            # so a step never grows with the batch (the sum diverges on small vocabularies).
            out_ids = torch.cat([o, neg])
            out_grad = torch.cat([g_pos * v, (g_neg * v.unsqueeze(1)).view(-1, dim)])
            w_out.index_add_(0, out_ids, rate * out_grad / _multiplicity(out_ids, V))
            w_in.index_add_(0, c, rate * grad_v / _multiplicity(c, V))
            steps_done += 1
        if progress:
            mean = loss_sum / max(n_batches, 1)
            print(f"epoch {epoch + 1}/{epochs}: {len(centre):,} pairs, loss {mean:.3f}")
    return WordVectors(vocab, w_in, counts)
