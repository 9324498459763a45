"""A checkpoint as an ONNX file, for runtimes without PyTorch (the book's in-page widget).

The file maps token ids (1, T) to the model's vocabulary ``logits`` (1, T, V) and the ``attention``
weights of every layer (1, n_layer, n_head, T, T), for any T from 1 to the context: what
``model(ids, attention=True)`` returns, in fp32. The model is read exactly as the package reads it:
a BERT as one segment (segment 0 everywhere, as :func:`~bertgpt.generate.fill_mask` does), a GPT
left to right. The weights are traced by PyTorch's ``torch.export`` exporter (``dynamo=True``, which
needs ``onnx`` and ``onnxscript``); it stores a tied matrix once, so the file is the size of the
weights in fp32::

    export_onnx(bertgpt.pretrained("bert-mini"), "bert-mini.onnx")
    python -m bertgpt export-onnx bert-mini --out bert-mini.onnx

The file's metadata names the model (``name``, ``family``, ``causal``, ``tokenizer``,
``weights_sha256``), so a reader of the file can check which weights it holds.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from .checkpoint import Checkpoint

OPSET = 20  #: the ONNX operator set; from 20 on, GELU is one operator
INPUTS = ("ids",)
OUTPUTS = ("logits", "attention")


class Exported(nn.Module):
    """What the ONNX file computes: ``(logits (B, T, V), attention (B, n_layer, n_head, T, T))`` of
    ids (B, T), by the model's own forward with ``attention=True`` (its explicit softmax path)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor):
        heads = dict(nsp=False) if self.model.family == "bert" else {}  # BERT's NSP head: not exported
        out = self.model(ids, attention=True, **heads)
        return out.logits, torch.stack(out.attention, dim=1)


def exportable(ck: Checkpoint) -> Exported:
    """A copy of ``ck``'s model in fp32 on the CPU, in eval mode, wrapped as the ONNX file computes it.

    The copy leaves the caller's model as it was (dtype, device, mode)."""
    if getattr(ck.model, "config", None) is None or ck.config.arch != "transformer":
        raise ValueError("only a Transformer GPT or BERT exports to ONNX (an LSTM has no attention "
                         "weights to return; a fine-tuned classifier has no vocabulary head)")
    model = copy.deepcopy(ck.model).float().cpu()
    return Exported(model).eval()


def export_onnx(ck: Checkpoint, path: str | Path, name: str | None = None) -> Path:
    """Write ``ck``'s model to ``path`` as one self-contained ONNX file (see the module's docstring).

    ``name`` goes into the file's metadata (default: the checkpoint's own name). The file is written
    beside ``path`` and renamed into place, so an interrupted export leaves no half-written file.
    """
    try:  # only the export needs these: the package runs without them (Colab, the chapters)
        import onnx
        import onnxscript  # noqa: F401 (torch's exporter imports it)
    except ImportError as exc:
        raise ImportError(f"exporting to ONNX needs onnx and onnxscript ({exc}): pip install onnx "
                          "onnxscript (scripts/setup.sh installs both)") from None

    wrapped = exportable(ck)
    context = ck.config.context
    example = torch.tensor([[ck.tokenizer.cls_id] + [ck.tokenizer.n_special] * 7])  # (1, 8)
    length = torch.export.Dim("length", min=1, max=context)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed ..."
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.export's own deprecations, not ours
        program = torch.onnx.export(wrapped, (example,), dynamo=True, opset_version=OPSET,
                                    input_names=list(INPUTS), output_names=list(OUTPUTS),
                                    dynamic_shapes={"ids": {1: length}}, verbose=False)
    proto = program.model_proto
    for node in proto.graph.node:  # the traced source lines: a third of the file, of no use to a reader
        node.doc_string = ""
    meta = dict(name=name or ck.info.get("name", ""), family=ck.model.family, causal=str(ck.config.causal),
                context=str(context), tokenizer=ck.tokenizer.kind,
                weights_sha256=ck.info.get("weights_sha256", ""))
    onnx.helper.set_model_props(proto, meta)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    onnx.save_model(proto, str(tmp))
    os.replace(tmp, path)
    return path
