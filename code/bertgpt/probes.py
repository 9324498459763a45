"""Linear probes: how much of a task can a linear classifier read off each layer of a frozen model?

This is the book's experiment, not GPT-1's: GPT-1 varied how many pretrained layers were
transferred before fine-tuning. Here nothing is fine-tuned. Each example is packed as for
fine-tuning (:func:`bertgpt.inputs.pack_examples`), the frozen model is run once, and the sequence's
feature is taken at every depth: layer 0 is the embedding output, layer i the residual stream after
block i. A logistic regression (L2-regularised, trained with torch on standardised features) is
fitted on the training split and scored on the test split, one per layer::

    out = probe(pretrained("bert-mini"), load_task("era"))
    out["accuracy"]            # {0: ..., 1: ..., ..., n_layer: ...}
    out["majority_baseline"]

The feature of a sequence is the mean over its real tokens, by default, for both families: one rule
for both models keeps the comparison fair, and it needs no token the model was not pretrained to
summarise with (GPT never saw ``[EXTRACT]`` in pretraining; BERT's ``[CLS]`` learned only next-sentence
prediction). ``pool="token"`` takes each family's own summary position instead: the last real token
for GPT (the only position whose causal view covers the whole input), ``[CLS]`` for BERT.

A probe of a frozen model gives the same answer every time, so :func:`cached_probe` keeps it in the
cache, keyed by the model's weights, the task's examples and the probe's settings: two chapters that
read the same layers of the same model probe it once::

    cached_probe(pretrained("gpt-mini"), load_task("next"), max_examples=300)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .cache import digest, kept
from .checkpoint import Checkpoint
from .device import device_of, eval_mode, to_device
from .inputs import collate, pack_examples
from .progress import progress_bar
from .tasks import Example, Task

POOLS = ("mean", "token")


@torch.no_grad()
def layer_features(model, tokenizer, examples: list[Example], pool: str = "mean",
                   batch_size: int = 64, progress: bool | str = False) -> torch.Tensor:
    """Features (n_layer + 1, N, d) of ``examples`` at every depth of the frozen ``model``.

    Each layer's states pass through a LayerNorm without weights before pooling, so that every depth
    is on the same scale (pre-LN residual streams grow with depth; post-LN ones are normalised already).
    ``progress`` shows a bar over the batches (a string labels it).
    """
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, not {pool!r}")
    device = device_of(model)
    rows = pack_examples(tokenizer, model.family, model.config.context, examples)
    out = []
    with eval_mode(model):
        for s in progress_bar(range(0, len(rows), batch_size), progress, enabled=progress):
            batch = to_device(collate(rows[s:s + batch_size], tokenizer), device)
            ids, keep = batch["input_ids"], batch["pad_mask"]
            B = ids.size(0)
            states = model(ids, segments=batch.get("segments"), pad_mask=keep, predict=False,
                           states=True).states
            h = F.layer_norm(torch.stack(states), (states[0].size(-1),))  # (L + 1, B, T, d)
            if pool == "mean":
                w = keep[None, :, :, None].to(h.dtype)
                out.append((h * w).sum(2) / w.sum(2))
            elif model.family == "gpt":  # the last real token
                out.append(h[:, torch.arange(B, device=device), keep.sum(1) - 1])
            else:  # [CLS]
                out.append(h[:, :, 0])
    return torch.cat(out, dim=1).float().cpu()


def fit_linear(x: torch.Tensor, y: torch.Tensor, n_classes: int, l2: float = 1e-3, steps: int = 300,
               seed: int = 0) -> torch.nn.Linear:
    """Multinomial logistic regression on features ``x`` (N, d), full-batch Adam, L2 penalty ``l2``."""
    torch.manual_seed(seed)
    linear = torch.nn.Linear(x.size(1), n_classes)
    opt = torch.optim.Adam(linear.parameters(), lr=0.05)
    for _ in range(steps):
        loss = F.cross_entropy(linear(x), y) + l2 * linear.weight.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return linear


def probe(checkpoint: Checkpoint, task: Task, max_examples: int | None = 1000, pool: str = "mean",
          l2: float = 1e-3, steps: int = 300, seed: int = 0, progress: bool = True,
          layers: list[int] | None = None, test_features: torch.Tensor | None = None) -> dict:
    """Per-layer linear-probe accuracy on the test split of ``task``, for a frozen pretrained model.

    ``checkpoint`` is a :class:`~bertgpt.checkpoint.Checkpoint` (on the device to run on);
    ``max_examples`` caps the training split (a stratified subsample). Returns ``accuracy``
    ({layer: accuracy}, layer 0 = embeddings), ``train_accuracy`` (same keys), ``majority_baseline``
    and the sizes. ``layers`` fits only those depths (default: every one); each layer's fit is seeded
    alone, so a layer scores the same with or without the others. ``progress`` shows bars for the
    feature extraction and the fitting (``BERTGPT_QUIET=1`` hides every bar). ``test_features`` are
    the test split's features as :func:`layer_features` gives them for this model and ``pool``, when
    the caller has them already (a probe with another seed reads the same test examples).
    """
    if not task.test:
        raise ValueError(f"task {task.name!r} has no test examples to score the probes on")
    ck = checkpoint
    if max_examples is not None:
        task = task.subsample(max_examples, seed=seed)
    label = f"probe {ck.model.family} on {task.name}"
    x_train, x_test = (layer_features(ck.model, ck.tokenizer, split, pool,  # (L + 1, N, d)
                                      progress=progress and f"{label}: {name} features")
                       if known is None else known
                       for name, split, known in (("train", task.train, None),
                                                  ("test", task.test, test_features)))
    y_train = torch.tensor([e.label for e in task.train])
    y_test = torch.tensor([e.label for e in task.test])
    accuracy, train_accuracy = {}, {}
    depths = range(x_train.size(0)) if layers is None else sorted(layers)
    for layer in progress_bar(depths, f"{label}: fit each layer", enabled=progress):
        mean, std = x_train[layer].mean(0), x_train[layer].std(0) + 1e-6  # standardise with train statistics
        linear = fit_linear((x_train[layer] - mean) / std, y_train, task.n_classes, l2, steps, seed)
        with torch.no_grad():
            for x, y, acc in ((x_train, y_train, train_accuracy), (x_test, y_test, accuracy)):
                acc[layer] = (linear((x[layer] - mean) / std).argmax(-1) == y).float().mean().item()
    return dict(task=task.name, family=ck.model.family, pool=pool, accuracy=accuracy,
                train_accuracy=train_accuracy, majority_baseline=task.majority_baseline(),
                train_examples=len(task.train), test_examples=len(task.test))


def _probe_key(checkpoint: Checkpoint, task: Task, options: dict) -> str | None:
    """The cache key of a probe: the weights' hash, the task's examples and the settings; ``None``
    for a model with no saved hash (built in memory), which is never cached."""
    weights = checkpoint.info.get("weights_sha256")
    if not weights:
        return None
    return digest([weights, task.name, repr(task.train), repr(task.test), sorted(options.items())])


_TEST_FEATURES: dict[str, torch.Tensor] = {}  # a few test splits' features, by weights and examples
_KEPT = 8


def _test_features(checkpoint: Checkpoint, task: Task, options: dict) -> torch.Tensor | None:
    """The test split's features for :func:`cached_probe`, extracted once per process for a model with
    a saved hash: probes of one model with several seeds share them. ``None`` without a hash."""
    weights = checkpoint.info.get("weights_sha256")
    if not weights:
        return None
    pool = options.get("pool", "mean")
    key = digest([weights, pool, repr(task.test)], 64)
    if key not in _TEST_FEATURES:
        if len(_TEST_FEATURES) >= _KEPT:
            _TEST_FEATURES.pop(next(iter(_TEST_FEATURES)))  # the oldest
        _TEST_FEATURES[key] = layer_features(checkpoint.model, checkpoint.tokenizer, task.test, pool)
    return _TEST_FEATURES[key]


def cached_probe(checkpoint: Checkpoint, task: Task, **options) -> dict:
    """:func:`probe` with ``options``, kept in ``$BERTGPT_CACHE/probes``: the second call with the same
    weights, examples and settings reads the first one's result instead of probing again.

    A model without a saved weights hash (one built in memory) is probed every time. ``progress``
    is not part of the key. The test split's features are kept in memory for the process (a few
    splits), so probing one model with several seeds extracts them once.
    """
    progress = options.pop("progress", False)
    key = _probe_key(checkpoint, task, options)

    def run():  # only when nothing is kept: extracting the test features is itself work
        features = _test_features(checkpoint, task, options)
        return probe(checkpoint, task, progress=progress, test_features=features, **options)

    out = kept("probes", key and f"{task.name}-{key}", run)
    for name in ("accuracy", "train_accuracy"):  # JSON keeps the layers' numbers as strings
        out[name] = {int(layer): a for layer, a in out[name].items()}
    return out


# --- How far the words alone go on next-sentence prediction -----------------------------------------


def idf_weights(docs: list[list[list[int]]], vocab_size: int, n_special: int = 0) -> torch.Tensor:
    """Inverse document frequency (V,) of each token id over ``docs`` (each a list of tokenized
    sentences), smoothed as ``log((1 + D) / (1 + df)) + 1``; the first ``n_special`` ids weigh 0."""
    df = torch.zeros(vocab_size)
    for doc in docs:
        ids = [t for sentence in doc for t in sentence]
        if ids:
            df += torch.bincount(torch.tensor(ids), minlength=vocab_size).clamp(max=1).float()
    idf = torch.log((1 + len(docs)) / (1 + df)) + 1
    idf[:n_special] = 0
    return idf


class TokenBagNSP(torch.nn.Module):
    """Next-sentence prediction from which tokens A and B contain, and nothing else.

    A pair enters as two sets of token ids, so word order, repetition and position are gone. The
    log-odds that B follows A adds three terms:

    - a learned weight for each vocabulary entry found in both A and B;
    - two overlap scores, standardised: the tf-idf cosine of the two sets, and the share of B's
      distinct tokens that also occur in A;
    - a bilinear score of rank ``rank`` between A's and B's idf-weighted sets, scaled to unit
      length, ``(a U) . (b V)``: it can learn that two texts come from one period or topic without
      sharing a token.

    Fit it with :func:`fit_token_bag_nsp`; call it on ``(A, B, is_next)`` pairs for log-odds (N,).
    """

    def __init__(self, idf: torch.Tensor, rank: int = 32, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        vocab = len(idf)
        self.register_buffer("idf", idf.float())
        self.shared = torch.nn.Parameter(torch.zeros(vocab))
        self.u = torch.nn.Parameter(0.01 * torch.randn(vocab, rank, generator=g))
        self.v = torch.nn.Parameter(0.01 * torch.randn(vocab, rank, generator=g))
        self.overlap = torch.nn.Linear(2, 1)
        self.register_buffer("mean", torch.zeros(2))
        self.register_buffer("std", torch.ones(2))

    def sets(self, pairs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each pair's distinct tokens of A, of B and of both, as (N, K) id tensors padded with
        id 0, which weighs nothing (its idf is 0 and it is never counted as shared)."""
        a, b, both = [], [], []
        for first, second, *_ in pairs:
            sa, sb = set(first), set(second)
            for out, ids in ((a, sa), (b, sb), (both, sa & sb)):
                out.append(torch.tensor(sorted(ids), dtype=torch.long))
        padded = (torch.nn.utils.rnn.pad_sequence(x, batch_first=True) for x in (a, b, both))
        return tuple(F.pad(x, (0, 1)) if x.size(1) == 0 else x for x in padded)  # never 0 wide

    def overlaps(self, a, b, both) -> torch.Tensor:
        """The two overlap scores (N, 2): tf-idf cosine and the share of B's tokens found in A."""
        w = self.idf
        cosine = w[both].square().sum(1) / (w[a].norm(dim=1) * w[b].norm(dim=1)).clamp(min=1e-9)
        share = (both > 0).sum(1) / (b > 0).sum(1).clamp(min=1)
        return torch.stack([cosine, share.float()], 1)

    def score(self, a, b, both) -> torch.Tensor:
        """Log-odds (N,) from the padded sets of :meth:`sets`."""
        wa, wb = self.idf[a], self.idf[b]
        bag_a = F.embedding_bag(a, self.u, per_sample_weights=wa, mode="sum", padding_idx=0)
        bag_b = F.embedding_bag(b, self.v, per_sample_weights=wb, mode="sum", padding_idx=0)
        bag_a = bag_a / wa.norm(dim=1, keepdim=True).clamp(min=1e-9)
        bag_b = bag_b / wb.norm(dim=1, keepdim=True).clamp(min=1e-9)
        shared = F.embedding_bag(both, self.shared[:, None], mode="sum", padding_idx=0).squeeze(1)
        dense = self.overlap((self.overlaps(a, b, both) - self.mean) / self.std).squeeze(1)
        return shared + dense + (bag_a * bag_b).sum(1)

    def forward(self, pairs) -> torch.Tensor:
        with torch.no_grad():
            return self.score(*self.sets(pairs))


def fit_token_bag_nsp(pairs, idf: torch.Tensor, rank: int = 32, epochs: int = 10, lr: float = 1e-2,
                      l2: float = 1e-5, batch_size: int = 512, seed: int = 0) -> TokenBagNSP:
    """A :class:`TokenBagNSP` fitted with Adam on ``pairs`` (A, B, is_next): the first 90% train it,
    and the weights of the epoch most accurate on the last 10% are kept (``pairs`` drawn document by
    document, as :func:`~bertgpt.data.nsp_pairs` draws them, hold out whole documents)."""
    model = TokenBagNSP(idf, rank, seed)
    a, b, both = model.sets(pairs)
    y = torch.tensor([p[2] for p in pairs], dtype=torch.float32)
    n = int(0.9 * len(pairs))
    if n < 1 or n == len(pairs):
        raise ValueError(f"{len(pairs)} pairs are too few to train on 90% and choose on 10%")
    dense = model.overlaps(a[:n], b[:n], both[:n])
    model.mean.copy_(dense.mean(0))
    model.std.copy_(dense.std(0).clamp(min=1e-6))
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best, kept = -1.0, None
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=g).split(batch_size):
            loss = F.binary_cross_entropy_with_logits(model.score(a[idx], b[idx], both[idx]), y[idx])
            opt.zero_grad()
            (loss + l2 * (model.u.square().sum() + model.v.square().sum())).backward()
            opt.step()
        with torch.no_grad():
            held = ((model.score(a[n:], b[n:], both[n:]) > 0) == y[n:].bool()).float().mean().item()
        if held > best:
            best, kept = held, {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(kept)
    return model
