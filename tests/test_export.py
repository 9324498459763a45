"""The course models as ONNX files (bertgpt.export): onnxruntime reads what PyTorch computes.

Each export runs in onnxruntime on the same ids as the PyTorch model, at the shortest, a typical
and the longest length the file accepts: logits and every layer's attention weights agree within
1e-3 (fp32; measured differences are about 1e-5).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import bertgpt
from bertgpt.cli import main
from bertgpt.export import OUTPUTS, export_onnx, exportable

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

TOLERANCE = 1e-3  # max abs difference, logits and attention weights, fp32
SENTENCE = "The state of the Union is strong, and the [MASK] of the people is its strength."


@pytest.fixture(scope="module", params=["gpt-mini", "bert-mini", "bert-mini-ltr"])
def exported(request, tmp_path_factory):
    name = request.param
    ck = bertgpt.pretrained(name)
    ck.model.train()  # the export works on a copy: the caller's model keeps its mode
    path = export_onnx(ck, tmp_path_factory.mktemp("onnx") / f"{name}.onnx", name=name)
    assert ck.model.training and next(ck.model.parameters()).dtype == torch.float32
    ck.model.eval()
    return name, ck, ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_onnx_returns_what_pytorch_computes(exported):
    name, ck, session = exported
    context = ck.config.context
    text = ck.tokenizer.encode(SENTENCE)
    g = torch.Generator().manual_seed(0)
    rows = {"one token": text[:1], "a sentence": text,
            "the whole context": torch.randint(ck.tokenizer.n_special, ck.config.vocab_size, (context,),
                                               generator=g).tolist()}
    wrapped = exportable(ck)
    for label, ids in rows.items():
        x = torch.tensor([ids])
        with torch.no_grad():
            expected = [t.numpy() for t in wrapped(x)]
        got = session.run(list(OUTPUTS), {"ids": x.numpy()})
        for output, want, have in zip(OUTPUTS, expected, got):
            assert have.shape == want.shape, (name, label, output)
            diff = float(np.abs(have - want).max())
            assert diff <= TOLERANCE, f"{name}, {label}: {output} differs by {diff:.2e}"
    cfg = ck.config
    assert got[1].shape == (1, cfg.n_layer, cfg.n_head, context, context)


def test_onnx_attention_is_causal_only_for_a_causal_model(exported):
    name, ck, session = exported
    ids = np.array([ck.tokenizer.encode(SENTENCE)])
    weights = session.run(["attention"], {"ids": ids})[0]  # (1, L, H, T, T)
    above = np.triu(np.ones(weights.shape[-2:], dtype=bool), k=1)
    later = weights[..., above].sum()
    assert np.allclose(weights.sum(-1), 1, atol=1e-5)  # every query's weights sum to one
    assert (later == 0) == ck.config.causal, (name, later)


def test_cli_export_onnx_writes_the_file_and_refuses_an_unknown_name(tmp_path, capsys):
    out = tmp_path / "bert.onnx"
    main(["export-onnx", "bert-mini", "--out", str(out)])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["path"] == str(out) and report["bytes"] == out.stat().st_size > 1_000_000
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert meta["name"] == "bert-mini" and meta["causal"] == "False" and meta["tokenizer"] == "wordpiece"
    assert meta["weights_sha256"] == bertgpt.hub.card("bert-mini")["provenance"]["weights_sha256"]
    with pytest.raises(SystemExit) as exit_:
        main(["export-onnx", "gpt-huge"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown model 'gpt-huge'" in err and "gpt-mini" in err and "Traceback" not in err
