"""The shipped course models on the test addresses, each beside the best count-based model that
sees the same context, measured in the same run.

    PYTHONPATH=code python bench/course_models.py

- gpt-mini's test loss per token, against an interpolated bigram table (unigram and bigram counts
  of the training addresses, the mixing weight chosen on the validation addresses).
- bert-mini's masked-token accuracy at 15%, every chosen token a [MASK] (the same masks as
  ``bertgpt.heldout``), against naive Bayes over the two neighbours' bigram tables (a neighbour
  that is itself masked is not used); BERT's own 80/10/10 metric beside it; the content-word cloze
  (top 5), against the same two-neighbour table's top 5 on the same sentences; NSP on 2,000 test
  pairs (word overlaps alone: 78.0% on validation pairs, ``nsp_ceiling.py``).

Prints one JSON object per model. About 3 minutes on one core.
"""

import json

import torch

import bertgpt
from bertgpt.evaluate import masked_rows
from bertgpt.generate import encode_masked
from bertgpt.heldout import SEED, content_cloze_items, heldout_metrics
from bertgpt.pretraining import VAL_MASK_RATE, token_stream


def counts(streams, vocab: int):
    uni, big = torch.zeros(vocab), torch.zeros(vocab, vocab)
    for t in streams:
        uni += torch.bincount(t, minlength=vocab).float()
        if len(t) > 1:
            big.index_put_((t[:-1], t[1:]), torch.ones(len(t) - 1), accumulate=True)
    return uni, big


def bigram_loss(uni, big, stream, weight: float) -> float:
    p_uni = (uni + 1) / (uni + 1).sum()
    p_big = big / big.sum(1, keepdim=True).clamp(min=1)
    prev, nxt = stream[:-1], stream[1:]
    p = weight * p_big[prev, nxt] + (1 - weight) * p_uni[nxt]
    return float(-p.log().mean())


def gpt_row(corpus) -> dict:
    ck = bertgpt.pretrained("gpt-mini", corpus=corpus, course=True)
    tok, vocab = ck.tokenizer, ck.tokenizer.vocab_size
    uni, big = counts([token_stream(tok, corpus.train)], vocab)
    val, test = token_stream(tok, corpus.val), token_stream(tok, corpus.test)
    weight = min((w / 20 for w in range(1, 20)), key=lambda w: bigram_loss(uni, big, val, w))
    return dict(model="gpt-mini", **heldout_metrics(ck, corpus),
                bigram_test_loss=round(bigram_loss(uni, big, test, weight), 4), bigram_weight=weight)


class Neighbours:
    """Naive Bayes over the bigram tables of a masked token's left and right neighbours."""

    def __init__(self, tok, corpus):
        self.tok = tok
        rows = [torch.tensor(ids) for d in corpus.train for ids in tok.encode_batch(d.paragraphs) if ids]
        uni, self.big = counts(rows, tok.vocab_size)
        self.log_uni = torch.log(uni + 1)

    def scores(self, row: list[int], j: int) -> torch.Tensor:
        score = self.log_uni.clone()
        blank = (self.tok.mask_id, self.tok.pad_id, self.tok.cls_id, self.tok.sep_id)
        if j > 0 and row[j - 1] not in blank:
            score += torch.log(self.big[row[j - 1]] + 0.1) - self.log_uni
        if j + 1 < len(row) and row[j + 1] not in blank:
            score += torch.log(self.big[:, row[j + 1]] + 0.1) - self.log_uni
        return score


def bert_row(corpus) -> dict:
    ck = bertgpt.pretrained("bert-mini", corpus=corpus, course=True)
    tok = ck.tokenizer
    table = Neighbours(tok, corpus)
    paragraphs = [p for d in corpus.test for p in d.paragraphs]
    hits = n = 0
    for row, chosen, truth in masked_rows(tok, paragraphs, VAL_MASK_RATE, SEED, ck.config.context - 2):
        for c, t in zip(chosen, truth):
            hits, n = hits + int(table.scores(row, c).argmax() == t), n + 1
    cloze = 0
    items = content_cloze_items(tok, corpus)
    for text, word in items:
        row = [tok.cls_id, *encode_masked(tok, text), tok.sep_id]
        top5 = table.scores(row, row.index(tok.mask_id)).topk(5).indices.tolist()
        cloze += word in [tok.id_to_token(i) for i in top5]
    return dict(model="bert-mini", **heldout_metrics(ck, corpus), neighbours_mlm_accuracy=round(hits / n, 4),
                neighbours_content_top5=round(cloze / len(items), 4), masked_positions=n,
                nsp_word_overlap_ceiling=0.780)


def main():
    torch.set_num_threads(1)
    corpus = bertgpt.load_corpus()
    for row in (gpt_row(corpus), bert_row(corpus)):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
