"""Levers for pretraining the two minis on a CPU (issue 10): what each one buys, measured.

Three parts, each a subcommand; run with ``PYTHONPATH=code``:

- ``speed``: tokens/s of one training step (forward, backward, AdamW) at the mini shape for each
  lever, as a ratio to the fp32 baseline. The variants are interleaved round by round in one process
  (every round runs every variant), so load from other processes hits all of them alike; the table
  gives the median ratio and its range over the rounds.
- ``data``: the cost of building batches (tokenizing, NSP pairs, masking) against the cost of a step,
  and of tokenizing the corpus against loading cached ids.
- ``train``: one pretraining run of a recipe (flags below), with validation at fixed updates; it
  prints the loss (GPT) or MLM/NSP accuracy (BERT) on held-out documents and the training seconds.
- ``e2e``: the recommended recipe, both minis, from nothing cached but the tokenizers: either one
  after the other with 2 threads each (``--mode seq``) or side by side, one thread each
  (``--mode par``), with the wall time from start to both models trained.

The loop is a bare copy of ``bertgpt.trainer.train`` (AdamW with decay on matrices, warm-up then
cosine, clipping 1.0) with the levers added; the data and loss functions are the package's. Nothing
in ``code/bertgpt`` is changed: the recipe is for the package to adopt.

    python bench/levers.py speed [--quick]
    python bench/levers.py data
    python bench/levers.py train --family bert --steps 1500 --lr 2e-3 --bf16 --dropout 0 --short 0.9
    python bench/levers.py e2e --mode par
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

_here = Path(__file__).resolve().parent
CODE = _here / "code" if (_here / "code").exists() else _here.parent / "code"  # a carried copy wins
sys.path.insert(0, str(CODE))
try:
    import bertgpt  # noqa: F401
except ImportError:  # a bare accelerator machine with torch only: load the modules the sweep needs
    import types

    class _Stub(types.ModuleType):
        def __getattr__(self, name):
            return None

    for _name in ("tokenizers", "tqdm", "tqdm.auto"):
        sys.modules.setdefault(_name, _Stub(_name))
    _pkg = types.ModuleType("bertgpt")
    _pkg.__path__ = [str(CODE / "bertgpt")]
    sys.modules["bertgpt"] = _pkg

from bertgpt import pretraining as P  # noqa: E402
from bertgpt.config import model_config  # noqa: E402
from bertgpt.corpus import load_corpus  # noqa: E402
from bertgpt.model import build  # noqa: E402
from bertgpt.tokenizer import cache_dir, tokenizer_for  # noqa: E402
from bertgpt.trainer import cpu_has_bf16, lr_factor, to_device, validate  # noqa: E402

HERE = Path(__file__).resolve().parent


def autocast(bf16: bool, device: str = "cpu"):
    return torch.autocast(device, dtype=torch.bfloat16, enabled=bf16)


# --- data, with token ids cached ------------------------------------------------------------------


def _ids_cache(name: str) -> Path:
    return cache_dir() / "ids" / name


def gpt_stream(corpus, tok, split: str, cached: bool = True) -> torch.Tensor:
    """The package's token_stream, stored once as uint16 (vocab < 65,536) and loaded afterwards."""
    path = _ids_cache(f"{corpus.name}-{corpus.fingerprint[:12]}-{tok.vocab_size}-gpt-{split}.pt")
    if cached and path.exists():
        return torch.load(path).long()
    ids = P.token_stream(tok, corpus.part(split))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ids.to(torch.uint16), path)
    return ids


def bert_docs(corpus, tok, split: str, cached: bool = True):
    """The package's document_sentences, stored once as one uint16 tensor plus offsets."""
    path = _ids_cache(f"{corpus.name}-{corpus.fingerprint[:12]}-{tok.vocab_size}-bert-{split}.pt")
    if cached and path.exists():
        blob = torch.load(path)
        flat, sent_len, doc_len = blob["flat"].tolist(), blob["sent"].tolist(), blob["doc"].tolist()
        docs, pos, s = [], 0, 0
        for n in doc_len:
            doc = []
            for k in sent_len[s : s + n]:
                doc.append(flat[pos : pos + k])
                pos += k
            s += n
            docs.append(doc)
        return docs
    docs = P.document_sentences(tok, corpus.part(split))
    flat = [t for d in docs for sent in d for t in sent]
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        dict(
            flat=torch.tensor(flat, dtype=torch.uint16),
            sent=torch.tensor([len(x) for d in docs for x in d]),
            doc=torch.tensor([len(d) for d in docs]),
        ),
        path,
    )
    return docs


# --- the loop -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Recipe:
    family: str = "gpt"
    steps: int = 850
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 100
    decay: str = "cosine"
    dropout: float = 0.1
    bf16: bool = False
    mask_rate: float = 0.15
    short: float = 0.0  # BERT: fraction of updates at length ``short_len`` before 128
    short_len: int = 64
    threads: int = 0  # 0: leave torch's setting alone
    seed: int = 0
    eval_at: tuple = ()  # updates after which to validate (the end always)
    eval_batches: int = 16
    cached_ids: bool = True
    pos_init: str = "normal"  # "sin": position embeddings start as sinusoids of the same std (0.02)
    attn_std: float = 0.02  # init std of the query/key/value weights (the papers: 0.02)
    device: str = "cpu"
    beta2: float = 0.999
    nsp_coef: float = 1.0  # BERT: loss = MLM + nsp_coef * NSP (the paper: 1)
    untie: bool = False  # BERT: the MLM decoder gets its own matrix (the paper ties it)
    pos_std: float = 0.02  # init std of the position embeddings (the papers: 0.02)
    unigram_bias: bool = False  # BERT: start the MLM output bias at log unigram frequencies
    positions: str = "learned"  # "rotary": the package's ModelConfig.positions; "alibi": use_alibi


@torch.no_grad()
def init_sinusoidal(weight: torch.Tensor, std: float = 0.02) -> None:
    """The original Transformer's sinusoids (Vaswani et al. 2017), scaled to ``std``, as the starting
    point of the learned position embeddings: p_i . p_j then depends on i - j from the first update."""
    T, d = weight.shape
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    weight[:, 0::2] = torch.sin(pos * freq)
    weight[:, 1::2] = torch.cos(pos * freq)
    weight.mul_(std / weight.std())


def use_alibi(model) -> None:
    """Probe of a position scheme neither 2018 paper used, for BERT: the learned table is kept, and
    each head adds -m_h * |i - j| to its attention scores (Press et al. 2022, made symmetric for a
    bidirectional model; m_h = 2^-2, 2^-4, ...), so reading one's neighbours is the default from
    the first update. Bench only: ``bertgpt.model.Attention`` is replaced on this model's instances,
    by a forward without dropout and without the causal mask. (Rotary positions are in the package:
    ``ModelConfig.positions``.)
    """
    import types

    from bertgpt.model import Attention

    if model.config.causal:
        raise SystemExit("--positions alibi is written for BERT only (it drops the causal mask)")
    H = model.config.n_head
    slopes = torch.tensor([2.0 ** (-2 * (h + 1)) for h in range(H)])

    def forward(self, x, *, mask=None, cache=None, need_weights=False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        pos = torch.arange(T)
        bias = -slopes[:, None, None] * (pos[None, :] - pos[:, None]).abs()  # (nh, T, T)
        if mask is not None:
            bias = bias + torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        return self.proj(y.transpose(1, 2).reshape(B, T, C)), None

    for m in model.modules():
        if isinstance(m, Attention):
            m.forward = types.MethodType(forward, m)


DUMP = HERE / "_dump.pt"  # ids and special-token ids, for machines without the corpus (not committed)


def dump(args):
    corpus = load_corpus()
    out = {}
    for fam, kind in (("gpt", "bpe"), ("bert", "wordpiece")):
        tok = tokenizer_for(corpus, kind, 4096)
        out[fam + "_tok"] = {
            k: getattr(tok, k) for k in ("pad_id", "mask_id", "cls_id", "sep_id", "n_special", "vocab_size")
        }
    tb, tw = tokenizer_for(corpus, "bpe", 4096), tokenizer_for(corpus, "wordpiece", 4096)
    for split in ("train", "val"):
        out["gpt_" + split] = gpt_stream(corpus, tb, split).to(torch.uint16)
        out["bert_" + split] = bert_docs(corpus, tw, split)
    torch.save(out, DUMP)
    print(f"wrote {DUMP}")


def make_data(r: Recipe, corpus=None):
    g = torch.Generator().manual_seed(r.seed)
    if os.environ.get("LEVERS_DUMP"):
        d = torch.load(DUMP)
        tok = types_ns(**d[r.family + "_tok"])
        if r.family == "gpt":
            return (
                tok,
                P.gpt_batches(d["gpt_train"].long(), 128, r.batch, g),
                P.gpt_eval_batches(d["gpt_val"].long(), 128, r.batch, r.eval_batches),
            )
        return (tok,) + _bert_data(r, tok, d["bert_train"], d["bert_val"], g)
    corpus = corpus or load_corpus()
    if r.family == "gpt":
        tok = tokenizer_for(corpus, "bpe", 4096)
        train_ids = gpt_stream(corpus, tok, "train", r.cached_ids)
        val_ids = gpt_stream(corpus, tok, "val", r.cached_ids)
        return (
            tok,
            P.gpt_batches(train_ids, 128, r.batch, g),
            P.gpt_eval_batches(val_ids, 128, r.batch, r.eval_batches),
        )
    tok = tokenizer_for(corpus, "wordpiece", 4096)
    return (tok,) + _bert_data(
        r, tok, bert_docs(corpus, tok, "train", r.cached_ids), bert_docs(corpus, tok, "val", r.cached_ids), g
    )


def types_ns(**kw):
    import types

    return types.SimpleNamespace(**kw)


def _bert_data(r: Recipe, tok, docs, val_docs, g):
    val_gen = torch.Generator().manual_seed(10_000 + r.seed)  # the package's fixed validation pairs
    val_pairs = P.nsp_pairs(val_docs, 125, val_gen)
    val_pairs = val_pairs[: r.eval_batches * r.batch]
    # validation always at 15% and length 128, whatever the training recipe, so runs compare
    val = [
        P.bert_collate(val_pairs[i : i + r.batch], tok, 0.15, val_gen)
        for i in range(0, len(val_pairs), r.batch)
    ]
    n_short = int(r.short * r.steps)

    def batches():
        if n_short:
            it = P.bert_batches(docs, tok, r.short_len, r.batch, r.mask_rate, g)
            for _ in range(n_short):
                yield next(it)
        yield from P.bert_batches(docs, tok, 128, r.batch, r.mask_rate, g)

    return batches(), val


def run(r: Recipe, corpus=None, log=print) -> dict:
    if r.threads:
        torch.set_num_threads(r.threads)
    t0, cpu0 = time.perf_counter(), time.process_time()
    tok, batches, val = make_data(r, corpus)
    t_data = time.perf_counter() - t0
    if r.positions not in ("learned", "rotary", "alibi"):
        raise SystemExit(f"--positions must be learned, rotary or alibi, not {r.positions!r}")
    positions = "rotary" if r.positions == "rotary" else "learned"  # alibi: a patch on the learned table
    cfg = model_config("mini", r.family, vocab_size=tok.vocab_size, dropout=r.dropout, positions=positions)
    torch.manual_seed(r.seed)
    model = build(cfg).train()
    if r.pos_init == "sin":
        init_sinusoidal(model.backbone.pos_emb.weight)
    if r.untie and r.family == "bert":
        model.mlm_decoder.weight = torch.nn.Parameter(model.backbone.tok_emb.weight.detach().clone())
    if r.positions == "alibi":
        use_alibi(model)
    if r.pos_std != 0.02:
        with torch.no_grad():
            model.backbone.pos_emb.weight.normal_(0, r.pos_std)
    if r.attn_std != 0.02:
        with torch.no_grad():
            for blk in model.backbone.blocks:
                blk.attn.qkv.weight.normal_(0, r.attn_std)
    model.to(r.device)
    loss_fn = P.clm_loss if r.family == "gpt" else P.mlm_nsp_loss
    if r.family == "bert" and r.nsp_coef != 1.0:

        def loss_fn(model, batch, coef=r.nsp_coef):
            _, m = P.mlm_nsp_loss(model, batch)  # the same pieces, reweighted (recomputed: bench only)
            chosen = batch["labels"] != P.IGNORE
            out = model(batch["input_ids"], segments=batch["segments"], pad_mask=batch["pad_mask"],
                        predict=chosen)
            mlm = F.cross_entropy(out.logits.float(), batch["labels"][chosen])
            nsp = F.cross_entropy(out.nsp_logits.float(), batch["is_next"])
            return mlm + coef * nsp, m

    if r.family == "bert" and r.unigram_bias:
        counts = torch.ones(tok.vocab_size)
        for _ in range(50):
            b = next(batches)
            lab = b["labels"][b["labels"] != P.IGNORE]
            counts += torch.bincount(lab, minlength=tok.vocab_size).float()
        with torch.no_grad():
            model.mlm_decoder.bias.copy_(counts.log() - counts.sum().log())
    params = list(model.parameters())
    opt = torch.optim.AdamW(
        [
            dict(params=[p for p in params if p.dim() >= 2], weight_decay=0.01),
            dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0),
        ],
        lr=r.lr,
        betas=(0.9, r.beta2),
    )
    # The package's schedule: it reads only warmup, steps and decay, which a Recipe has too.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, r))
    evals, train_s, tokens = [], 0.0, 0
    eval_at = set(r.eval_at) | {r.steps}
    tic = time.perf_counter()
    for step in range(r.steps):
        batch = to_device(next(batches), r.device)
        tokens += (batch[0] if isinstance(batch, tuple) else batch["input_ids"]).numel()
        with autocast(r.bf16, r.device):
            loss, _ = _split(loss_fn(model, batch))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step + 1 in eval_at:
            train_s += time.perf_counter() - tic
            with autocast(r.bf16, r.device):
                m = validate(model, loss_fn, val)
            m = dict(
                step=step + 1,
                seconds=round(train_s, 1),
                tokens=tokens,
                **{k: round(v, 4) for k, v in m.items()},
            )
            evals.append(m)
            log(json.dumps(m))
            tic = time.perf_counter()
    return dict(
        recipe=dataclasses.asdict(r),
        data_seconds=round(t_data, 1),
        evals=evals,
        wall_seconds=round(time.perf_counter() - t0, 1),
        cpu_seconds=round(time.process_time() - cpu0, 1),
        final=evals[-1],
        model=model,
    )


def _split(out):
    return out if isinstance(out, tuple) else (out, {})


# --- speed ----------------------------------------------------------------------------------------


def speed(args):
    """Tokens/s per lever, interleaved round by round; ratios to today's step on one thread."""
    corpus = load_corpus()
    rounds, steps = (3, 8) if args.quick else (5, 15)
    for family in args.families:
        variants = [
            ("fp32, dropout 0.1 (today), 1 thread", dict()),
            ("bf16 autocast", dict(bf16=True)),
            ("dropout 0", dict(dropout=0.0)),
            ("bf16 + dropout 0", dict(bf16=True, dropout=0.0)),
            ("bf16 + dropout 0, batch 32", dict(bf16=True, dropout=0.0, batch=32)),
            ("fp32, dropout 0.1, 2 threads", dict(threads=2)),
            ("bf16 + dropout 0, 2 threads", dict(bf16=True, dropout=0.0, threads=2)),
        ]
        if family == "bert":
            variants.append(("bf16 + dropout 0, length 64", dict(bf16=True, dropout=0.0, short=1.0)))
        setups = []
        for name, kw in variants:
            r = Recipe(family=family, steps=10**6, warmup=10, **kw)
            _, it, _ = make_data(r, corpus)
            cfg = model_config("mini", family, vocab_size=4096, dropout=r.dropout)
            model = build(cfg).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            loss_fn = P.clm_loss if family == "gpt" else P.mlm_nsp_loss
            batches = [next(it) for _ in range(steps)]
            setups.append((name, r, model, opt, loss_fn, batches))
        rates = {name: [] for name, *_ in setups}
        for rnd in range(rounds + 1):
            for name, r, model, opt, loss_fn, batches in setups:
                torch.set_num_threads(r.threads or 1)
                tic, tokens = time.perf_counter(), 0
                for b in batches:
                    tokens += (b[0] if isinstance(b, tuple) else b["input_ids"]).numel()
                    with autocast(r.bf16):
                        loss, _ = _split(loss_fn(model, b))
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                if rnd:  # round 0 warms up
                    rates[name].append(tokens / (time.perf_counter() - tic))
        base = rates[setups[0][0]]
        print(
            f"\n{family}: {rounds} rounds of {steps} steps, batch 16 x 128 unless said; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        print(f"| {'variant':38} | tokens/s (median) | ratio to today (median, range) |")
        for name, v in rates.items():
            ratios = [a / b for a, b in zip(v, base)]
            print(
                f"| {name:38} | {statistics.median(v):17,.0f} | {statistics.median(ratios):.2f} "
                f"({min(ratios):.2f}-{max(ratios):.2f}) |",
                flush=True,
            )


# --- data cost ------------------------------------------------------------------------------------


def data(args):
    corpus = load_corpus()
    tb, tw = tokenizer_for(corpus, "bpe", 4096), tokenizer_for(corpus, "wordpiece", 4096)
    for name, fn, tok in (("gpt token stream", gpt_stream, tb), ("bert sentences", bert_docs, tw)):
        tic = time.perf_counter()
        for split in ("train", "val"):
            fn(corpus, tok, split, cached=False)
        raw = time.perf_counter() - tic
        tic = time.perf_counter()
        for split in ("train", "val"):
            fn(corpus, tok, split, cached=True)
        print(f"{name}: tokenize {raw:.1f} s, load cached uint16 ids {time.perf_counter() - tic:.2f} s")
    docs = bert_docs(corpus, tw, "train")
    g = torch.Generator().manual_seed(0)
    tic = time.perf_counter()
    pairs = P.nsp_pairs(docs, 125, g)
    t_pairs = time.perf_counter() - tic
    tic = time.perf_counter()
    for i in range(100):
        P.bert_collate(pairs[i * 16 : (i + 1) * 16], tw, 0.15, g)
    t_coll = (time.perf_counter() - tic) / 100
    print(
        f"bert: nsp_pairs for one epoch {t_pairs:.2f} s for {len(pairs)} pairs "
        f"({t_pairs / (len(pairs) / 16) * 1e3:.2f} ms per batch of 16); collate + mask {t_coll * 1e3:.2f} ms "
        "per batch of 16"
    )


# --- what a bigram table scores on the same masks --------------------------------------------------


def bigram(args):
    """MLM accuracy of count-based bigram guesses on bert-mini's validation masks (the package's
    pairs and masks at 15%): from the left neighbour alone, and from both neighbours (naive Bayes).
    A neighbour that is itself masked is not used. The transformer has to beat this to have left the
    plateau of "reading its neighbours"."""
    r = Recipe(family="bert")
    tok, _, val = make_data(r)
    corpus = None if os.environ.get("LEVERS_DUMP") else load_corpus()
    docs = torch.load(DUMP)["bert_train"] if corpus is None else bert_docs(corpus, tok, "train")
    V = tok.vocab_size
    big, uni = torch.zeros(V, V), torch.zeros(V)
    for doc in docs:
        for sent in doc:
            t = torch.tensor(sent)
            uni += torch.bincount(t, minlength=V).float()
            if len(t) > 1:
                big.index_put_((t[:-1], t[1:]), torch.ones(len(t) - 1), accumulate=True)
    log_uni = torch.log(uni + 1)
    n = hit_uni = hit_left = hit_both = 0
    for b in val:
        inp, lab = b["input_ids"], b["labels"]
        for i, j in (lab != P.IGNORE).nonzero().tolist():
            y, n = int(lab[i, j]), n + 1
            hit_uni += int(log_uni.argmax()) == y
            score = log_uni.clone()
            left = int(inp[i, j - 1]) if j > 0 else tok.pad_id
            right = int(inp[i, j + 1]) if j + 1 < inp.size(1) else tok.pad_id
            if left not in (tok.mask_id, tok.pad_id):
                score += torch.log(big[left] + 0.1) - log_uni
            hit_left += int(score.argmax()) == y
            if right not in (tok.mask_id, tok.pad_id):
                score += torch.log(big[:, right] + 0.1) - log_uni
            hit_both += int(score.argmax()) == y
    print(
        f"{n} masked validation positions: unigram {hit_uni / n:.3f}, left bigram {hit_left / n:.3f}, "
        f"both neighbours {hit_both / n:.3f}"
    )


# --- end to end -----------------------------------------------------------------------------------

GPT_RECIPE = dict(family="gpt", steps=850, batch=16, lr=3e-3, warmup=100, dropout=0.0, bf16=True)
BERT_RECIPE = dict(
    family="bert",
    steps=2400,
    batch=16,
    lr=1e-3,
    warmup=150,
    dropout=0.0,
    bf16=True,
    mask_rate=0.4,
    short=0.5,
    short_len=64,
)


def _recipe_from(args) -> Recipe:
    base = dict(GPT_RECIPE if args.family == "gpt" else BERT_RECIPE) if args.recommended else {}
    base["family"] = args.family
    for k in (
        "steps",
        "batch",
        "lr",
        "warmup",
        "dropout",
        "mask_rate",
        "short",
        "short_len",
        "threads",
        "seed",
        "decay",
        "pos_init",
        "attn_std",
        "device",
        "beta2",
        "nsp_coef",
        "pos_std",
        "positions",
    ):
        v = getattr(args, k)
        if v is not None:
            base[k] = v
    if args.bf16 is not None:
        base["bf16"] = args.bf16
    base["bf16"] = base.get("bf16", False) and (base.get("device", "cpu") != "cpu" or cpu_has_bf16())
    base["eval_at"] = tuple(args.eval_at or ())
    base["unigram_bias"] = args.unigram_bias
    base["untie"] = args.untie
    base["cached_ids"] = not args.no_cache
    return Recipe(**base)


def train_cmd(args):
    r = _recipe_from(args)
    out = run(r)
    out.pop("model")
    print(
        "RESULT "
        + json.dumps(
            dict(
                recipe=out["recipe"],
                data_seconds=out["data_seconds"],
                final=out["final"],
                wall_seconds=out["wall_seconds"],
                cpu_seconds=out["cpu_seconds"],
                evals=out["evals"],
            )
        )
    )


def e2e(args):
    """Both recommended recipes from an empty id cache; wall time from start to both trained."""
    import shutil

    shutil.rmtree(cache_dir() / "ids", ignore_errors=True)
    cmd = [sys.executable, __file__, "train", "--recommended", "--no-cache"]
    env = dict(os.environ, PYTHONPATH=str(CODE))
    tic = time.perf_counter()
    if args.mode == "par":
        procs = [
            subprocess.Popen(
                cmd + ["--family", f, "--threads", "1"], env=env, stdout=subprocess.PIPE, text=True
            )
            for f in ("gpt", "bert")
        ]
        outs = [p.communicate()[0] for p in procs]
    else:
        outs = [
            subprocess.run(
                cmd + ["--family", f, "--threads", "2"], env=env, stdout=subprocess.PIPE, text=True
            ).stdout
            for f in ("gpt", "bert")
        ]
    wall = time.perf_counter() - tic
    load = os.getloadavg()
    for o in outs:
        print([line for line in o.splitlines() if line.startswith("RESULT")][-1])
    print(
        f"E2E mode={args.mode} wall {wall:.0f} s (load average at the end "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} on {os.cpu_count()} cores)"
    )


# Quality sweep at equal updates. The loss at a given update does not depend on the device, so the
# sweep can run on an accelerator when one is lent (``--device cuda``) and on the CPU otherwise.
B0 = "--family bert --bf16 --dropout 0 --warmup 150 --lr 2e-3 --short 0.9 --steps 3000"
TODAY = "--family bert --no-bf16 --dropout 0.1 --lr 1e-3 --warmup 100 --steps 3000"
GPT = "--family gpt --steps 850 --lr 2e-3 --warmup 100"
B1 = "--family bert --bf16 --dropout 0 --warmup 150 --lr 1e-3 --short 0.9 --steps 3000"
SWEEP1 = {  # first round
    "bert today (fp32, dropout 0.1, lr 1e-3, len 128)": TODAY,
    "bert today + bf16": TODAY + " --bf16",
    "bert today + dropout 0": TODAY + " --dropout 0",
    "B0: bf16, dropout 0, lr 2e-3, 90% at len 64": B0,
    "B0 seed 1": B0 + " --seed 1",
    "B0 seed 2": B0 + " --seed 2",
    "B0 + mask 0.30 (departs)": B0 + " --mask-rate 0.3",
    "B0 + mask 0.40 (departs)": B0 + " --mask-rate 0.4",
    "B0 + sinusoidal pos init": B0 + " --pos-init sin",
    "B0 + qkv init std 0.088": B0 + " --attn-std 0.088",
    "B0 + lr 5e-3": B0 + " --lr 5e-3",
    "B0 + lr 1e-3": B0 + " --lr 1e-3",
    "B0 + short len 32": B0 + " --short-len 32",
    "B0 + batch 32, 1500 steps": B0 + " --batch 32 --steps 1500 --warmup 75",
    "B0, no short phase (len 128)": B0 + " --short 0",
    "B0 + mask 0.4 + sin + qkv 0.088": B0 + " --mask-rate 0.4 --pos-init sin --attn-std 0.088",
    "gpt today (fp32, dropout 0.1)": GPT + " --no-bf16 --dropout 0.1",
    "gpt bf16, dropout 0": GPT + " --bf16 --dropout 0",
    "gpt fp32, dropout 0, seed 1": "--family gpt --no-bf16 --dropout 0 --steps 850 --seed 1",
    "gpt bf16, dropout 0, seed 1": "--family gpt --bf16 --dropout 0 --steps 850 --seed 1",
    "gpt bf16, dropout 0, 600 steps": "--family gpt --bf16 --dropout 0 --steps 600 --warmup 70",
    "gpt bf16, dropout 0, lr 3e-3": "--family gpt --bf16 --dropout 0 --steps 850 --lr 3e-3",
    "gpt bf16, dropout 0, batch 32 x 425": GPT + " --bf16 --dropout 0 --steps 425 --batch 32 --warmup 50",
}
SWEEP2 = {  # second round: BERT wants a lower rate, not a higher one
    "B1: bf16, dropout 0, lr 1e-3, 90% at len 64": B1,
    "B1 seed 1": B1 + " --seed 1",
    "B1, no short phase (len 128)": B1 + " --short 0",
    "B1 + lr 5e-4": B1 + " --lr 5e-4",
    "B1 + lr 7e-4": B1 + " --lr 7e-4",
    "B1 + mask 0.30 (departs)": B1 + " --mask-rate 0.3",
    "B1 + mask 0.30, seed 1": B1 + " --mask-rate 0.3 --seed 1",
    "B1 + mask 0.40 (departs)": B1 + " --mask-rate 0.4",
    "B1 + lr 7e-4 + mask 0.30": B1 + " --lr 7e-4 --mask-rate 0.3",
    "B1 + warmup 500": B1 + " --warmup 500",
    "B1 + beta2 0.98": B1 + " --beta2 0.98",
    "B1 + lr 2e-3 + beta2 0.98": B1 + " --lr 2e-3 --beta2 0.98",
    "B1 + batch 32, 1500 steps": B1 + " --batch 32 --steps 1500 --warmup 75",
    "B1 + linear decay": B1 + " --decay linear",
    "B1 + sinusoidal pos init": B1 + " --pos-init sin",
    "B1, 5000 steps": B1 + " --steps 5000",
    "gpt bf16, dropout 0, lr 3e-3, 750 steps": "--family gpt --bf16 --dropout 0 --steps 750 --lr 3e-3",
    "gpt bf16, dropout 0, lr 3e-3, seed 1": "--family gpt --bf16 --dropout 0 --steps 850 --lr 3e-3 --seed 1",
    "gpt bf16, dropout 0, lr 4e-3": "--family gpt --bf16 --dropout 0 --steps 850 --lr 4e-3",
}
M4 = "--family bert --bf16 --dropout 0 --warmup 150 --lr 1e-3 --mask-rate 0.4 --steps 3000"
SWEEP3 = {  # third round: full length, mask 0.4, and what might break the plateau
    "M4: bf16, dropout 0, lr 1e-3, len 128, mask 0.40": M4,
    "M4 seed 1": M4 + " --seed 1",
    "M4 + unigram output bias": M4 + " --unigram-bias",
    "M4 + NSP weight 0 (diagnostic)": M4 + " --nsp-coef 0",
    "M4 + NSP weight 3": M4 + " --nsp-coef 3",
    "M4 + mask 0.50": M4 + " --mask-rate 0.5",
    "M4 + mask 0.60": M4 + " --mask-rate 0.6",
    "M4 + lr 2e-3, warm-up 500": M4 + " --lr 2e-3 --warmup 500",
    "M4 + lr 1.5e-3": M4 + " --lr 1.5e-3",
    "M4 + warm-up 50": M4 + " --warmup 50",
    "M4 + half the updates at length 64": M4 + " --short 0.5",
    "M4 + batch 8, 6000 steps, lr 7e-4": M4 + " --batch 8 --steps 6000 --lr 7e-4 --warmup 300",
    "M4, 6000 steps": M4 + " --steps 6000",
    "M4 + mask 0.15 (= today's recipe without dropout, bf16)": M4 + " --mask-rate 0.15",
    "gpt bf16, dropout 0, lr 3e-3, 700 steps": "--family gpt --bf16 --dropout 0 --steps 700 --lr 3e-3",
    "gpt bf16, dropout 0, lr 4e-3, 700 steps": "--family gpt --bf16 --dropout 0 --steps 700 --lr 4e-3",
}
SWEEPS = {"1": SWEEP1, "2": SWEEP2, "3": SWEEP3}


def sweep(args):
    env = dict(os.environ, PYTHONPATH=str(CODE))
    table = SWEEPS[args.round]
    names = [n for n in table if not args.only or any(o in n for o in args.only)]
    procs = {}
    for n in names:
        extra = table[n].split()
        ev = (
            ["--eval-at", "500", "1000", "2000", "3000", "4500"]
            if "bert" in extra
            else ["--eval-at", "250", "500"]
        )
        cmd = [
            sys.executable,
            __file__,
            "train",
            *extra,
            "--device",
            args.device,
            "--threads",
            str(args.threads),
            *ev,
        ]
        procs[n] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if len(procs) % args.parallel == 0:
            list(procs.values())[-1].wait()
    results = {}
    for n, p in procs.items():
        out = p.communicate()[0]
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT")]
        results[n] = json.loads(lines[-1][7:]) if lines else out[-800:]
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    for n, res in results.items():
        if isinstance(res, str):
            print(f"{n}: FAILED {res}")
            continue
        cells = []
        for e in res["evals"]:
            if "mlm_accuracy" in e:
                cells.append(f"{e['step']}: {e['mlm_accuracy']:.3f}/{e['nsp_accuracy']:.3f}")
            else:
                cells.append(f"{e['step']}: {e['loss']:.3f}")
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--quick", action="store_true")
    s.add_argument("--families", nargs="+", default=["gpt", "bert"])
    sub.add_parser("data")
    sub.add_parser("dump")
    sub.add_parser("bigram")
    w = sub.add_parser("sweep")
    w.add_argument("--device", default="cpu")
    w.add_argument("--threads", type=int, default=1)
    w.add_argument("--parallel", type=int, default=2)
    w.add_argument("--only", nargs="*")
    w.add_argument("--round", default="2", choices=sorted(SWEEPS))
    w.add_argument("--out", default=str(HERE / "_sweep.json"))
    t = sub.add_parser("train")
    t.add_argument("--family", choices=("gpt", "bert"), default="gpt")
    t.add_argument("--recommended", action="store_true", help="start from the recommended recipe")
    for k, typ in (
        ("steps", int),
        ("batch", int),
        ("lr", float),
        ("warmup", int),
        ("dropout", float),
        ("mask_rate", float),
        ("short", float),
        ("short_len", int),
        ("threads", int),
        ("seed", int),
        ("decay", str),
        ("pos_init", str),
        ("attn_std", float),
        ("device", str),
        ("beta2", float),
        ("nsp_coef", float),
        ("pos_std", float),
        ("positions", str),
    ):
        t.add_argument("--" + k.replace("_", "-"), dest=k, type=typ, default=None)
    t.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None)
    t.add_argument("--unigram-bias", action="store_true")
    t.add_argument("--untie", action="store_true")
    t.add_argument("--eval-at", type=int, nargs="*")
    t.add_argument("--no-cache", action="store_true")
    e = sub.add_parser("e2e")
    e.add_argument("--mode", choices=("seq", "par"), default="par")
    args = ap.parse_args(argv)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, cpu bf16 {cpu_has_bf16()}",
        flush=True,
    )
    dict(speed=speed, data=data, train=train_cmd, e2e=e2e, dump=dump, sweep=sweep, bigram=bigram)[args.cmd](
        args
    )


if __name__ == "__main__":
    main()
