"""The labelled occurrences of "interest", contextual vectors and the nearest-centroid classifier."""

from collections import Counter

import pytest
import torch

import bertgpt
from bertgpt.senses import contextual_vectors, load_senses, nearest_centroid_accuracy


def test_senses_file_is_consistent():
    rows = load_senses()
    assert len(rows) == 120
    assert set(Counter(r.sense for r in rows)) == {"finance", "concern"}
    for r in rows:
        assert r.sentence[r.offset:r.offset + len("interest")].lower() == "interest", r
    corpus = {d.id: d for d in bertgpt.load_corpus().documents}
    for r in rows[::10]:  # each row points at its paragraph in the corpus
        assert r.sentence in corpus[r.doc].paragraphs[r.paragraph]


def test_identical_vectors_score_the_majority_rate():
    labels = ["a"] * 7 + ["b"] * 3
    same = torch.ones(10, 4)
    assert nearest_centroid_accuracy(same, labels) == pytest.approx(0.7)


def test_separated_vectors_score_one():
    labels = ["a"] * 5 + ["b"] * 5
    X = torch.cat([torch.tensor([[1.0, 0.1]]).repeat(5, 1), torch.tensor([[0.1, 1.0]]).repeat(5, 1)])
    X = X + 0.01 * torch.randn(10, 2, generator=torch.Generator().manual_seed(0))
    assert nearest_centroid_accuracy(X, labels) == 1.0


@pytest.mark.parametrize("family", ["bert", "gpt"])
def test_contextual_vectors_shape_and_context(family, wordpiece):
    torch.manual_seed(0)
    model = bertgpt.build(bertgpt.model_config("tiny", family)).eval()
    ck = bertgpt.Checkpoint(model, wordpiece, {})
    sentences = ["the interest on the debt", "in the public interest of all"]
    offsets = [s.index("interest") for s in sentences]
    X = contextual_vectors(ck, sentences, offsets, len("interest"))
    assert X.shape == (model.config.n_layer + 1, 2, model.config.d_model)
    assert not torch.allclose(X[-1, 0], X[-1, 1])  # the same word, two contexts, two vectors
    long = " ".join(["word"] * 200) + " interest " + " ".join(["word"] * 200)
    Y = contextual_vectors(ck, [long], [long.index("interest")], len("interest"))
    assert Y.shape[1] == 1
