"""Tokenizers, trained on the corpus with Hugging Face ``tokenizers``: one class, three kinds.

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
import json
import os
from collections import Counter
from pathlib import Path

from tokenizers import Tokenizer as _HF
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from .corpus import Corpus
from .progress import progress_bar

# GPT-1 needs a start, a delimiter and an extract token for fine-tuning; BERT needs the rest.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[START]", "[DELIM]", "[EXTRACT]")
KINDS = ("bpe", "wordpiece", "char")


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
    as they are read (``BERTGPT_QUIET=1`` hides it)."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    specials = list(SPECIAL_TOKENS)
    if kind == "bpe":
        hf = _HF(models.BPE(unk_token="[UNK]", end_of_word_suffix="</w>"))
        hf.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        hf.decoder = decoders.BPEDecoder(suffix="</w>")
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                      end_of_word_suffix="</w>", show_progress=False)
    elif kind == "wordpiece":
        hf = _HF(models.WordPiece(unk_token="[UNK]"))
        hf.normalizer = normalizers.BertNormalizer(lowercase=True)
        hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        hf.decoder = decoders.WordPiece(prefix="##")
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials,
                                            show_progress=False)
    else:  # char: a BPE with no merges (vocab_size=1) keeps just the alphabet
        hf = _HF(models.BPE(unk_token="[UNK]"))
        hf.normalizer = normalizers.NFKC()
        hf.decoder = decoders.Fuse()
        trainer = trainers.BpeTrainer(vocab_size=1, special_tokens=specials, limit_alphabet=200,
                                      show_progress=False)
    total = len(texts) if hasattr(texts, "__len__") else None
    hf.train_from_iterator(progress_bar(texts, f"train {kind} tokenizer", total=total, enabled=progress),
                           trainer)
    return Tokenizer(hf)


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
    key = hashlib.sha256(f"{corpus.fingerprint}-{kind}-{vocab_size}".encode()).hexdigest()[:16]
    return cache_dir() / "tokenizers" / f"{corpus.name}-{kind}-{vocab_size}-{key}.json"


def tokenizer_for(corpus: Corpus, kind: str = "bpe", vocab_size: int = 4096,
                  progress: bool = True) -> Tokenizer:
    """A tokenizer trained on ``corpus``'s training split, cached by corpus, kind and size.

    Training one is not bit-reproducible (the tokenizers library breaks ties between equally
    frequent merges differently from run to run: measured here, two trainings on the same text gave
    about 65 of 4,096 tokens other ids), so a cached tokenizer is kept, and a course model's own is put
    here before anything trains on its corpus (:func:`bertgpt.hub.pretrained`). ``progress``: see
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
