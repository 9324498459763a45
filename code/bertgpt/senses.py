"""Word senses: hand-labelled occurrences of one word, embedded statically and in context.

``data/senses.csv`` holds 120 occurrences of "interest" in the State of the Union addresses, each
labelled by reading its sentence (``finance``: the charge paid for borrowed money; ``concern``: every
other sense). A static word vector gives every occurrence the same point; a Transformer gives each
occurrence its own hidden state. :func:`nearest_centroid_accuracy` measures how well either
separates the senses::

    rows = load_senses()
    X = contextual_vectors(pretrained("bert-mini"), [r.sentence for r in rows],
                           [r.offset for r in rows], len("interest"))       # (layers + 1, N, d)
    nearest_centroid_accuracy(X[-1], [r.sense for r in rows])
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoint import Checkpoint
from .device import device_of, eval_mode
from .inputs import bert_inputs

SENSES_CSV = Path(__file__).parent / "data" / "senses.csv"


@dataclass(frozen=True)
class Occurrence:
    doc: str         # document id in the corpus
    paragraph: int   # paragraph index in ``Document.paragraphs``
    occurrence: int  # which occurrence of the word in that paragraph (0 = first)
    offset: int      # character offset of the word in ``sentence``
    sense: str
    sentence: str


def load_senses(path: str | Path = SENSES_CSV) -> list[Occurrence]:
    """The labelled occurrences of a CSV with the columns of ``data/senses.csv`` ('#' lines are notes)."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return [Occurrence(r["doc"], int(r["paragraph"]), int(r["occurrence"]), int(r["offset"]),
                           r["sense"], r["sentence"]) for r in rows]


@torch.no_grad()
def contextual_vectors(checkpoint: Checkpoint, sentences: list[str], offsets: list[int], length: int,
                       max_tokens: int | None = None) -> torch.Tensor:
    """The hidden states at a word's position: a (L + 1, N, d) tensor, layer 0 being the embeddings.

    ``offsets[i]`` is the character offset of the word (``length`` characters) in ``sentences[i]``;
    where the tokenizer cuts it into several pieces, their states are averaged. BERT reads
    ``[CLS] sentence [SEP]``, GPT reads the sentence as it is (so it sees only the left context);
    a sentence longer than the context keeps a window of tokens around the word.
    """
    model, tok = checkpoint.model, checkpoint.tokenizer
    budget = (max_tokens or model.config.context) - 2
    device = device_of(model)
    out = []
    for sentence, start in zip(sentences, offsets):
        enc = tok.hf.encode(sentence, add_special_tokens=False)
        pieces = [i for i, (a, b) in enumerate(enc.offsets) if a < start + length and b > start]
        if not pieces:
            raise ValueError(f"no token covers characters {start}..{start + length} of {sentence!r}")
        lo = max(0, min(pieces[0] - budget // 2, len(enc.ids) - budget))
        window = enc.ids[lo:lo + budget]
        if model.family == "bert":
            ids, shift = bert_inputs(tok, window)[0], 1 - lo  # [CLS] comes first, all in segment A
        else:
            ids, shift = window, -lo
        with eval_mode(model):
            states = model(torch.tensor([ids], device=device), predict=False, states=True).states
        # the last layer is read after the final LayerNorm (pre-LN models have one), as the heads see it
        out.append(torch.stack([h[0, [p + shift for p in pieces]].mean(0) for h in states]))
    return torch.stack(out, dim=1).cpu()


def nearest_centroid_accuracy(vectors: torch.Tensor, labels: list[str]) -> float:
    """Leave-one-out accuracy of a nearest-centroid classifier (cosine similarity to each sense's mean).

    Each occurrence is classified by the centroids of all the others. Where the centroids are equally
    close — as when every occurrence has the same vector — the prediction is the most frequent sense
    among the others, so identical vectors score exactly the leave-one-out majority rate.
    """
    X = torch.nn.functional.normalize(vectors.float(), dim=1)
    names = sorted(set(labels))
    y = torch.tensor([names.index(s) for s in labels])
    correct = 0
    for i in range(len(y)):
        rest = torch.arange(len(y)) != i
        counts = torch.bincount(y[rest], minlength=len(names))
        centroids = torch.stack([X[rest & (y == k)].mean(0) for k in range(len(names))])
        sims = torch.nn.functional.normalize(centroids, dim=1) @ X[i]
        if torch.allclose(sims, sims[0].expand_as(sims), atol=1e-6):
            guess = int(torch.argmax(counts))
        else:
            guess = int(torch.argmax(sims))
        correct += guess == int(y[i])
    return correct / len(y)
