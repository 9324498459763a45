import math

import pytest
import torch
import torch.nn.functional as F

from bertgpt.generate import fill_mask
from bertgpt.pretraining import clm_loss
from bertgpt.scoring import log_likelihood, pseudo_log_likelihood, token_log_probs
from conftest import tiny

SENTENCE = "the congress shall have power to lay and collect taxes"


def _overfit(model, loss, steps, until=0.01):
    """Adam on one batch for ``steps`` updates, then on until the loss is under ``until`` (at most
    ``steps`` more): how fast a tiny model memorises varies with the machine's arithmetic."""
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for step in range(2 * steps):
        opt.zero_grad()
        value = loss(model)
        if step >= steps and value.item() < until:
            break
        value.backward()
        opt.step()
    return model.eval()


def test_log_likelihood_is_the_sum_of_next_token_log_probs(gpt, wordpiece):
    score = log_likelihood(gpt, wordpiece, SENTENCE)
    ids = torch.tensor([[wordpiece.sep_id, *wordpiece.encode(SENTENCE)]])
    with torch.no_grad():
        by_hand = -F.cross_entropy(gpt(ids).logits[0, :-1], ids[0, 1:], reduction="sum")
    assert score.n_tokens == len(ids[0]) - 1 and score.log_prob < 0
    assert math.isclose(score.log_prob, float(by_hand), rel_tol=1e-5)


def test_a_continuation_is_scored_after_its_prompt_which_is_read_not_counted(gpt, wordpiece):
    prompt, text = "the congress shall have", "power to lay and collect taxes"
    p, t = wordpiece.encode(prompt), wordpiece.encode(text)
    ids = torch.tensor([[wordpiece.sep_id, *p, *t]])
    with torch.no_grad():
        by_hand = -F.cross_entropy(gpt(ids).logits[0, -len(t) - 1:-1], ids[0, -len(t):], reduction="sum")
    score = log_likelihood(gpt, wordpiece, text, after=prompt)
    assert score.n_tokens == len(t)
    assert math.isclose(score.log_prob, float(by_hand), rel_tol=1e-5)
    assert score.log_prob != log_likelihood(gpt, wordpiece, text).log_prob  # the prompt was read


def test_a_long_stream_is_scored_once_per_token_in_sliding_windows(gpt):
    stream = torch.randint(8, 100, (100,))  # > 3 contexts of 32
    for stride in (8, 16, 31):
        logp = token_log_probs(gpt, stream, stride=stride)
        assert logp.shape == (99,)
        first = gpt(stream[None, :32]).logits[0].log_softmax(-1)[torch.arange(31), stream[1:32]]
        assert torch.allclose(logp[:31], first, atol=1e-5)  # the first window's tokens
    start = 16  # with stride 16, token 40 is scored in the window starting at 16
    with torch.no_grad():
        window = gpt(stream[None, start:start + 32]).logits[0].log_softmax(-1)
    assert math.isclose(float(token_log_probs(gpt, stream, stride=16)[39]),
                        float(window[40 - start - 1, stream[40]]), abs_tol=1e-5)


def test_pseudo_log_likelihood_masks_one_token_at_a_time(bert, wordpiece):
    ids = wordpiece.encode(SENTENCE)
    full = [wordpiece.cls_id, *ids, wordpiece.sep_id]
    by_hand = 0.0
    for i in range(1, len(ids) + 1):
        x = torch.tensor([full])
        x[0, i] = wordpiece.mask_id
        with torch.no_grad():
            by_hand += float(bert(x).logits[0, i].log_softmax(-1)[full[i]])
    for batch_size in (1, 5, 64):
        score = pseudo_log_likelihood(bert, wordpiece, SENTENCE, batch_size=batch_size)
        assert score.n_tokens == len(ids) and score.log_prob < 0
        assert math.isclose(score.log_prob, by_hand, rel_tol=1e-5)


def test_a_sentence_the_model_learnt_scores_above_its_words_shuffled(wordpiece):
    shuffled = "taxes the power collect to shall and congress lay have"
    ids = torch.tensor([[wordpiece.sep_id, *wordpiece.encode(SENTENCE)]])
    gpt = _overfit(tiny("gpt", vocab_size=wordpiece.vocab_size),
                   lambda m: clm_loss(m, (ids[:, :-1], ids[:, 1:])), 60)
    assert (log_likelihood(gpt, wordpiece, SENTENCE).log_prob
            > log_likelihood(gpt, wordpiece, shuffled).log_prob)

    full = torch.tensor([wordpiece.cls_id, *wordpiece.encode(SENTENCE), wordpiece.sep_id])
    n = len(full) - 2
    masked = full.repeat(n, 1)
    masked[torch.arange(n), torch.arange(1, n + 1)] = wordpiece.mask_id  # every one-mask copy

    def mlm(m):
        logits = m(masked).logits[torch.arange(n), torch.arange(1, n + 1)]
        return F.cross_entropy(logits, full[1:-1])

    bert = _overfit(tiny("bert", vocab_size=wordpiece.vocab_size), mlm, 300)
    assert (pseudo_log_likelihood(bert, wordpiece, SENTENCE).log_prob
            > pseudo_log_likelihood(bert, wordpiece, shuffled).log_prob)
    # a word that is one token in this session's vocabulary (WordPiece training is not deterministic
    # across processes, so "congress" may be split), so that masking it shifts no other position
    word = next(w for w in SENTENCE.split()[1:] if len(wordpiece.encode(w)) == 1)
    assert fill_mask(bert, wordpiece, SENTENCE.replace(word, "[MASK]", 1))[0][0][0] == word


def test_each_score_refuses_an_empty_text_and_the_other_family(gpt, bert, wordpiece):
    for score, model, other in ((log_likelihood, gpt, bert), (pseudo_log_likelihood, bert, gpt)):
        with pytest.raises(ValueError, match="nothing to score"):
            score(model, wordpiece, "")
        with pytest.raises(ValueError, match="needs a"):
            score(other, wordpiece, SENTENCE)
