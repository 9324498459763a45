"""Tokenizers, trained on the corpus and run by Hugging Face ``tokenizers``: one class, three kinds.

- ``"bpe"``: GPT-1's kind. Words are split on whitespace and punctuation, lower-cased, and merged
  bottom-up from characters; a word's last piece carries ``</w>``, as in GPT-1's vocabulary.
  (GPT-2 later moved to byte-level BPE, which needs no unknown token; we keep GPT-1's version.)
- ``"wordpiece"``: BERT's kind (uncased): a word's continuation pieces carry ``##``.
- ``"char"``: one token per character, for the smallest demonstrations.

Every kind shares the same special tokens at the same ids, so one model file serves all of them::

    tok = tokenizer_for(load_corpus(), "wordpiece", vocab_size=4096)   # trained once, then cached
    tok.encode("The state of the Union")                               # list of ids
    coverage(tok, ["Unto thee, O Lord"])     # how well the vocabulary fits another text

A tokenizer is fixed with the model it was trained with: a model pretrained on one corpus and trained
on another keeps its vocabulary, and :func:`coverage` says how much of the new text it then reads as
whole words, as pieces, or not at all.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
from collections import Counter, defaultdict
from pathlib import Path

from tokenizers import Tokenizer as _HF
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from .corpus import Corpus
from .progress import progress_bar

# GPT-1 needs a start, a delimiter and an extract token for fine-tuning; BERT needs the rest.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[START]", "[DELIM]", "[EXTRACT]")
KINDS = ("bpe", "wordpiece", "char")
TRAINER = 2  # in the cache key: 2, learn_merges (tokenizers trained by version 1 changed from run to run)


class Tokenizer:
    """A trained tokenizer: text to ids and back, with the special tokens' ids as attributes."""

    def __init__(self, hf: _HF):
        self.hf = hf
        for token in SPECIAL_TOKENS:
            if hf.token_to_id(token) != SPECIAL_TOKENS.index(token):
                raise ValueError(f"tokenizer lacks the special token {token} at id "
                                 f"{SPECIAL_TOKENS.index(token)}: train it with bertgpt.train_tokenizer")
        (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id,
         self.start_id, self.delim_id, self.extract_id) = range(len(SPECIAL_TOKENS))
        self.n_special = len(SPECIAL_TOKENS)

    @property
    def kind(self) -> str:
        model = json.loads(self.hf.to_str())["model"]
        if model["type"] == "WordPiece":
            return "wordpiece"
        return "bpe" if model.get("end_of_word_suffix") else "char"

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids, skip_special: bool = True) -> str:
        ids = [int(i) for i in ids]
        return self.hf.decode(ids, skip_special_tokens=skip_special)

    def tokens(self, text: str) -> list[str]:
        """The pieces ``text`` is cut into, as strings (for display)."""
        return self.hf.encode(text, add_special_tokens=False).tokens

    def id_to_token(self, i: int) -> str:
        return self.hf.id_to_token(int(i))

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as one JSON file, atomically."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.hf.to_str(), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return cls(_HF.from_file(str(path)))

    def __repr__(self):
        return f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size})"


def train_tokenizer(texts, kind: str = "bpe", vocab_size: int = 4096, progress: bool = True) -> Tokenizer:
    """Train a tokenizer of ``kind`` on an iterable of strings; ``progress`` shows a bar over the texts
    as they are read (``BERTGPT_QUIET=1`` hides it). The same texts give the same tokenizer, id for
    id, on every run and machine (:func:`learn_merges`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "char":  # a BPE with no merges (vocab_size=1) keeps just the 200 commonest characters
        hf = _HF(models.BPE(unk_token="[UNK]"))
        hf.normalizer = normalizers.NFKC()
        hf.decoder = decoders.Fuse()
        trainer = trainers.BpeTrainer(vocab_size=1, special_tokens=list(SPECIAL_TOKENS), limit_alphabet=200,
                                      show_progress=False)
        total = len(texts) if hasattr(texts, "__len__") else None
        hf.train_from_iterator(progress_bar(texts, "train char tokenizer", total=total, enabled=progress),
                               trainer)
        return Tokenizer(hf)
    # the rules that cut a text into words, then the words into pieces
    normalizer = (normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]) if kind == "bpe"
                  else normalizers.BertNormalizer(lowercase=True))
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = Counter()
    total = len(texts) if hasattr(texts, "__len__") else None
    for text in progress_bar(texts, f"train {kind} tokenizer", total=total, enabled=progress):
        words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    if kind == "bpe":
        vocab, merges = learn_merges(words, vocab_size, suffix="</w>")
        hf = _HF(models.BPE(vocab=vocab, merges=merges, unk_token="[UNK]", end_of_word_suffix="</w>"))
        hf.decoder = decoders.BPEDecoder(suffix="</w>")
    else:
        vocab, _ = learn_merges(words, vocab_size, prefix="##")
        hf = _HF(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
        hf.decoder = decoders.WordPiece(prefix="##")
    hf.normalizer, hf.pre_tokenizer = normalizer, pre_tokenizer
    return Tokenizer(hf)


def merge_pair(pieces: list[str], pair: tuple[str, str], new: str) -> list[str]:
    """``pieces`` with every occurrence of ``pair``, left to right, replaced by the piece ``new``."""
    merged, j = [], 0
    while j < len(pieces):
        if j + 1 < len(pieces) and (pieces[j], pieces[j + 1]) == pair:
            merged.append(new)
            j += 2
        else:
            merged.append(pieces[j])
            j += 1
    return merged


def learn_merges(words: dict[str, int], vocab_size: int, prefix: str = "", suffix: str = ""):
    """Byte-pair merges learned from ``words`` (word -> count): ``(vocab, merges)``, the vocabulary as
    token -> id and the merges in the order learned.

    The vocabulary starts with the special tokens, then every character the words use, then each
    word's first character plainly and the others with ``prefix`` ("##", WordPiece's mark of a
    continuation), a word's last one also with ``suffix`` ("</w>", GPT-1's end of word). Then, until
    it holds ``vocab_size`` tokens, the most frequent adjacent pair of pieces becomes one piece (a
    ``prefix`` on the right-hand one is dropped), counting each word as often as it occurs; equal
    counts go to the pair that sorts first. This is the rule of Hugging Face's trainers, made
    deterministic: they number some tokens in the order a hash map yields them, which changes from
    run to run (on the addresses, 65 of 4,096 ids; on the Bible, also which WordPiece tokens exist).
    """
    def pieces(word):
        marked = [c if i == 0 else prefix + c for i, c in enumerate(word)]
        marked[-1] += suffix
        return marked

    segmented = [(pieces(w), n) for w, n in sorted(words.items())]
    first = sorted({c for w in words for c in w}) + sorted({p for ps, _ in segmented for p in ps} - set(
        "".join(words)))
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*SPECIAL_TOKENS, *first]))}
    counts, where = Counter(), defaultdict(set)  # pair -> occurrences, pair -> the words holding it
    for i, (ps, n) in enumerate(segmented):
        for pair in zip(ps, ps[1:]):
            counts[pair] += n
            where[pair].add(i)
    heap = [(-n, pair) for pair, n in counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size and heap:
        n, pair = heapq.heappop(heap)
        if counts.get(pair) != -n:
            continue  # a count since changed: its newer entry is on the heap
        a, b = pair
        new = a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)
        merges.append(pair)
        vocab.setdefault(new, len(vocab))
        changed = set()
        for i in sorted(where.pop(pair)):
            ps, n = segmented[i]
            merged = merge_pair(ps, pair, new)
            for old in zip(ps, ps[1:]):
                counts[old] -= n
                changed.add(old)
            for fresh in zip(merged, merged[1:]):
                counts[fresh] += n
                where[fresh].add(i)
                changed.add(fresh)
            segmented[i] = (merged, n)
        for p in changed - {pair}:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
        counts.pop(pair, None)
    return vocab, merges


def coverage(tok: Tokenizer, texts, max_texts: int = 2000) -> dict:
    """How well ``tok``'s vocabulary fits ``texts``: what a user should see before training on them.

    Words are what the tokenizer's pre-tokenizer cuts (whitespace and punctuation). Returns
    ``tokens_per_word``, ``unknown_rate`` (the share of tokens that are ``[UNK]``: text the model cannot
    read at all) and ``split_words`` (the share of words cut into three pieces or more: words it reads
    as fragments), measured on at most ``max_texts`` texts spread evenly over ``texts``.
    """
    texts = [t for t in texts if t.strip()]
    texts = texts[:: max(1, -(-len(texts) // max_texts))]
    if not texts:
        raise ValueError("coverage needs at least one non-empty text")
    words = tokens = unknown = split = 0
    for enc in tok.hf.encode_batch(texts, add_special_tokens=False):
        pieces = Counter(w for w in enc.word_ids if w is not None)  # word -> pieces it was cut into
        words += len(pieces)
        tokens += len(enc.ids)
        unknown += enc.ids.count(tok.unk_id)
        split += sum(n >= 3 for n in pieces.values())
    return dict(words=words, tokens_per_word=round(tokens / max(words, 1), 3),
                unknown_rate=round(unknown / max(tokens, 1), 5), split_words=round(split / max(words, 1), 4))


def cache_dir() -> Path:
    """Where trained tokenizers and pretrained models are kept: ``$BERTGPT_CACHE`` or ~/.cache/bertgpt."""
    return Path(os.environ.get("BERTGPT_CACHE") or Path.home() / ".cache" / "bertgpt")


def tokenizer_path(corpus: Corpus, kind: str = "bpe", vocab_size: int = 4096) -> Path:
    """Where :func:`tokenizer_for` keeps the tokenizer of ``corpus``, ``kind`` and ``vocab_size``."""
    key = hashlib.sha256(f"{corpus.fingerprint}-{kind}-{vocab_size}-{TRAINER}".encode()).hexdigest()[:16]
    return cache_dir() / "tokenizers" / f"{corpus.name}-{kind}-{vocab_size}-{key}.json"


def tokenizer_for(corpus: Corpus, kind: str = "bpe", vocab_size: int = 4096,
                  progress: bool = True) -> Tokenizer:
    """A tokenizer trained on ``corpus``'s training split, cached by corpus, kind and size.

    Training one is reproducible (:func:`learn_merges`); a course model's own tokenizer, trained
    before that was so, is put here before anything trains on its corpus
    (:func:`bertgpt.hub.pretrained`), so that its variants read its ids. ``progress``: see
    :func:`train_tokenizer`.
    """
    path = tokenizer_path(corpus, kind, vocab_size)
    if path.exists():
        try:
            return Tokenizer.load(path)
        except Exception:  # a damaged cache entry is rebuilt, never trusted
            path.unlink()
    texts = [p for d in corpus.train for p in d.paragraphs]
    tok = train_tokenizer(texts, kind, vocab_size, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(path)
    return tok
