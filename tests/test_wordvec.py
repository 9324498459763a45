"""Skip-gram word vectors: words that share contexts end up close; seeded runs repeat."""

import random

import pytest
import torch

import bertgpt
from bertgpt.wordvec import WordVectors, skipgram_pairs, train_word_vectors, words


def synthetic(n: int = 300, seed: int = 0) -> list[str]:
    """'cat' and 'dog' share every context; 'car' and 'bus' share another; nothing else mixes."""
    rng = random.Random(seed)
    animals = ("cat", "dog")
    vehicles = ("car", "bus")
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            a = rng.choice(animals)
            out.append(f"the {a} eats meat and the {a} sleeps on a warm mat")
        else:
            v = rng.choice(vehicles)
            out.append(f"a {v} drives down the long road and a {v} needs fuel")
    return out


@pytest.fixture(scope="module")
def vectors() -> WordVectors:
    return train_word_vectors(synthetic(), dim=16, window=3, epochs=10, min_count=1, subsample=0,
                              lr=0.2, batch_size=256, seed=0)


def test_shared_contexts_make_close_vectors(vectors):
    assert vectors.similarity("cat", "dog") > vectors.similarity("cat", "car") + 0.5
    assert vectors.similarity("car", "bus") > vectors.similarity("bus", "dog") + 0.5
    assert vectors.most_similar("cat", k=1)[0][0] == "dog"
    assert vectors.most_similar("bus", k=1)[0][0] == "car"


def test_seeded_runs_repeat(vectors):
    again = train_word_vectors(synthetic(), dim=16, window=3, epochs=10, min_count=1, subsample=0,
                               lr=0.2, batch_size=256, seed=0)
    assert again.vocab == vectors.vocab
    assert torch.equal(again.vectors, vectors.vectors)
    other = train_word_vectors(synthetic(), dim=16, window=3, epochs=1, min_count=1, subsample=0,
                               lr=0.2, batch_size=256, seed=1)
    assert not torch.equal(other.vectors, vectors.vectors)


def test_vocabulary_and_lookups(vectors):
    assert vectors.counts == sorted(vectors.counts, reverse=True)  # most frequent first
    assert vectors.vector("cat").shape == (16,)
    assert "zebra" not in vectors
    with pytest.raises(KeyError, match="zebra"):
        vectors.vector("zebra")
    neighbours = vectors.most_similar("cat", k=3)
    assert len(neighbours) == 3 and all(w != "cat" for w, _ in neighbours)
    with pytest.raises(ValueError, match="min_count"):
        train_word_vectors(["one two"], min_count=5)


def test_pairs_stay_inside_the_window():
    ids = torch.arange(10)
    centre, context = skipgram_pairs([ids], window=2, generator=torch.Generator().manual_seed(0))
    gaps = (centre - context).abs()
    assert len(centre) > 0 and gaps.min() >= 1 and gaps.max() <= 2


def test_words_lowercases_and_keeps_apostrophes():
    assert words("The Nation's 2 States, united.") == ["the", "nation's", "states", "united"]


def test_corpus_input(corpus):
    small = bertgpt.Corpus("sotu-3", corpus.documents[:3])
    wv = train_word_vectors(small, dim=8, epochs=1, min_count=5, seed=0)
    assert len(wv) > 50 and "the" in wv
