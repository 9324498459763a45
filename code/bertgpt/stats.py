"""Statistics the chapters judge their results by: classification metrics, and the noise of a
measurement (a standard error, a seed band, a z-score), so that a gap is claimed only when it is
larger than what the test set's size or the seeds would give by chance.

The metrics take lists or tensors of integer labels::

    accuracy([1, 0, 1], [1, 1, 1]), f1(y, p), confusion_matrix(y, p, 3)
    standard_error(0.5, 200)        # 0.035: an accuracy near 50% on 200 test items
    bands_apart(seeds_a, seeds_b)   # mean ± half the range of each, not overlapping
"""

from __future__ import annotations

import torch


def _labels(y_true, y_pred) -> tuple[list[int], list[int]]:
    t = [int(v) for v in torch.as_tensor(y_true).flatten().tolist()]
    p = [int(v) for v in torch.as_tensor(y_pred).flatten().tolist()]
    if len(t) != len(p):
        raise ValueError(f"y_true has {len(t)} labels but y_pred has {len(p)}: they must pair up")
    if not t:
        raise ValueError("no labels: y_true and y_pred are empty")
    return t, p


def accuracy(y_true, y_pred) -> float:
    """The fraction of predictions equal to the true label."""
    t, p = _labels(y_true, y_pred)
    return sum(a == b for a, b in zip(t, p)) / len(t)


def f1(y_true, y_pred, positive: int = 1) -> float:
    """F1 of class ``positive``: 2·precision·recall / (precision + recall); 0 when it has no hits."""
    t, p = _labels(y_true, y_pred)
    tp = sum(a == positive and b == positive for a, b in zip(t, p))
    fp = sum(a != positive and b == positive for a, b in zip(t, p))
    fn = sum(a == positive and b != positive for a, b in zip(t, p))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def best_threshold(scores: list[float], labels: list[int]) -> float:
    """The cut (a midpoint between neighbouring scores) most accurate at "label 1 when score > cut"."""
    ranked = sorted(scores)
    cuts = [ranked[0] - 1] + [(a + b) / 2 for a, b in zip(ranked, ranked[1:])]
    return max(cuts, key=lambda t: accuracy(labels, [int(s > t) for s in scores]))


def seed_band(scores) -> tuple[float, float]:
    """(mean, half the range) of one condition's scores over seeds: the band, mean ± half the range,
    by which the chapters tell two conditions apart (:func:`bands_apart`)."""
    scores = [float(s) for s in scores]
    if not scores:
        raise ValueError("seed_band needs at least one score")
    return sum(scores) / len(scores), (max(scores) - min(scores)) / 2


def bands_apart(a, b) -> bool:
    """Whether two conditions' scores over seeds differ beyond the seeds: their bands, mean ± half the
    range (:func:`seed_band`), do not overlap."""
    (mean_a, half_a), (mean_b, half_b) = seed_band(a), seed_band(b)
    return abs(mean_a - mean_b) > half_a + half_b


def confusion_matrix(y_true, y_pred, n_classes: int | None = None) -> list[list[int]]:
    """Counts ``m[i][j]`` of examples of true class i predicted as j (classes 0 .. n_classes-1)."""
    t, p = _labels(y_true, y_pred)
    n_classes = n_classes or max(max(t), max(p)) + 1
    if min(min(t), min(p)) < 0 or max(max(t), max(p)) >= n_classes:
        raise ValueError(f"labels must lie in 0 .. {n_classes - 1} for n_classes={n_classes}")
    m = [[0] * n_classes for _ in range(n_classes)]
    for a, b in zip(t, p):
        m[a][b] += 1
    return m


# --- The noise of a measurement ---------------------------------------------------------------------


def standard_error(p: float, n: int) -> float:
    """The binomial standard error of an accuracy ``p`` measured on ``n`` independent test items,
    sqrt(p(1 - p) / n): about 3.5 points for an accuracy near 50% on 200 items."""
    if n < 1:
        raise ValueError(f"an accuracy needs n >= 1 test items, not {n}")
    return (p * (1 - p) / n) ** 0.5


def z_score(a: float, b: float, n: int) -> float:
    """Accuracy ``a`` minus accuracy ``b``, each measured on ``n`` test items, in standard errors of
    the difference (the two errors added in quadrature); 0 when both are exact (0 or 1)."""
    error = (standard_error(a, n) ** 2 + standard_error(b, n) ** 2) ** 0.5
    return (a - b) / error if error else 0.0


def sem(xs) -> float:
    """The standard error of the mean of ``xs`` (a list or a 1-D tensor, two values or more): the
    sample standard deviation over the square root of their number."""
    xs = [float(x) for x in xs]
    if len(xs) < 2:
        raise ValueError("a standard error of the mean needs two values or more")
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) ** 0.5
