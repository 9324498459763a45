import dataclasses
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bertgpt.compress import (
    checkpointing,
    classify_seconds,
    distill,
    distillation_loss,
    median_seconds,
    quantize,
    saved_activation_bytes,
    shrink,
    size_on_disk,
    soft_targets,
)
from bertgpt.config import FinetuneConfig
from bertgpt.finetune import Classifier, finetune, predict


def _lm_loss(model, ids):
    return F.cross_entropy(model(ids[:, :-1]).logits.flatten(0, 1), ids[:, 1:].flatten())


def test_checkpointing_keeps_less_and_gives_the_same_gradients(gpt_ck):
    model = gpt_ck.model
    ids = torch.randint(8, model.config.vocab_size, (4, model.config.context + 1),
                        generator=torch.Generator().manual_seed(0))

    def grads():
        model.zero_grad()
        _lm_loss(model, ids).backward()
        return [p.grad.clone() for p in model.parameters()]

    plain_bytes = saved_activation_bytes(lambda: _lm_loss(model, ids))
    plain = grads()
    with checkpointing(model):
        kept_bytes = saved_activation_bytes(lambda: _lm_loss(model, ids))
        again = grads()
    assert 0 < kept_bytes < plain_bytes
    for a, b in zip(plain, again):
        torch.testing.assert_close(a, b)
    assert "forward" not in vars(model.backbone.blocks[0])  # the class's forward is back
    model.zero_grad(set_to_none=True)


def test_shrink_keeps_the_named_blocks_and_leaves_the_teacher_alone(bert_ck):
    student = shrink(bert_ck, layers=[1])
    assert student.model.config.n_layer == 1 == len(student.model.backbone.blocks)
    assert len(bert_ck.model.backbone.blocks) == bert_ck.model.config.n_layer == 2
    for (_, a), (_, b) in zip(student.model.backbone.blocks[0].state_dict().items(),
                              bert_ck.model.backbone.blocks[1].state_dict().items()):
        assert torch.equal(a, b)
    ids = torch.randint(8, 100, (2, 10))
    assert student.model(ids).logits.shape == bert_ck.model(ids).logits.shape
    with pytest.raises(ValueError):
        shrink(bert_ck, layers=[2])


def test_distillation_loss_is_zero_when_the_student_agrees():
    logits = torch.randn(5, 3)
    labels = logits.argmax(-1)
    same = (logits / 2).softmax(-1)
    assert distillation_loss(logits, same, labels, 2.0, 1.0).abs() < 1e-6
    other = torch.full_like(same, 1 / 3)
    assert distillation_loss(logits, other, labels, 2.0, 1.0) > 0.01
    mixed = distillation_loss(logits, same, labels, 2.0, 0.5)
    torch.testing.assert_close(mixed, 0.5 * F.cross_entropy(logits, labels))


def test_distill_never_reads_the_labels_with_alpha_one(bert_ck, party):
    task = party.subsample(24)
    teacher = Classifier(bert_ck.model, bert_ck.tokenizer, party.labels, 0.0).eval()
    cfg = FinetuneConfig(epochs=1, batch_size=8, lr=1e-3)
    student = shrink(bert_ck, layers=[0])
    clf, result = distill(teacher, student, task, cfg, device="cpu")
    flipped = dataclasses.replace(task, train=[dataclasses.replace(e, label=1 - e.label)
                                               for e in task.train])
    again, _ = distill(teacher, student, flipped, cfg, device="cpu")
    for a, b in zip(clf.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert 0 <= result["test_accuracy"] <= 1 and len(result["history"]) == 1
    probs = soft_targets(teacher, task.train[:5], temperature=2.0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(5))


def test_quantize_shrinks_linear_layers_and_keeps_predictions_close(gpt_ck, party):
    clf, _ = finetune(gpt_ck, party.subsample(16), FinetuneConfig(epochs=1), device="cpu")
    q = quantize(clf)
    assert not any(type(m) is nn.Linear for m in q.modules())
    assert any(type(m) is nn.Linear for m in clf.modules())  # the original is untouched
    assert size_on_disk(q) < size_on_disk(clf)
    examples = party.test[:40]
    agree = sum(a == b for a, b in zip(predict(clf, examples), predict(q, examples)))
    assert agree >= 36


def test_median_seconds_is_the_median():
    calls = iter([0.08, 0.0, 0.06, 0.02])  # the first is a warm-up, never timed

    def wait():
        time.sleep(next(calls))

    assert 0.018 < median_seconds(wait, repeats=3, warmup=1) < 0.05  # neither 0 nor 0.06 nor 0.08


def test_classify_seconds_times_one_batch_without_gradients_and_leaves_the_mode(gpt_ck, party):
    clf = Classifier(gpt_ck.model, gpt_ck.tokenizer, party.labels).train()
    calls = []
    clf.register_forward_hook(lambda m, args, out: calls.append((torch.is_grad_enabled(), m.training)))
    seconds = classify_seconds(clf, party.test[:8], repeats=3)
    assert seconds > 0 and clf.training  # the caller's mode back
    assert calls == [(False, False)] * 4  # one warm-up and three timed calls, each one batch, in eval mode
