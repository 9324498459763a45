"""How much does bertgpt's training loop cost over a bare PyTorch loop of the same shape?

Both loops train the same GPT (4 layers, d=128, context 128, vocabulary 100, batch 32, fp32) from the
same initial weights on the same kind of batches, in one process, alternating rounds so that both
see the same machine load. The bare loop is forward, loss, backward, AdamW step and nothing else; the
package's loop adds the data iterator, the learning-rate schedule, gradient clipping, loss logging
and the progress bar. The target is a ratio of at least 0.90.

    python bench/trainer_overhead.py [--steps 30] [--rounds 3]
"""

import argparse
import copy
import json
import time

import torch
import torch.nn.functional as F

import bertgpt
from bertgpt.pretraining import clm_loss, gpt_batches


def bare_loop(model, stream, steps, cfg):
    g = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    offsets = torch.arange(cfg.context + 1)
    tic = time.perf_counter()
    for _ in range(steps):
        window = stream[torch.randint(len(stream) - cfg.context - 1, (32,), generator=g)[:, None] + offsets]
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps * 32 * cfg.context / (time.perf_counter() - tic)


def package_loop(model, stream, steps, cfg):
    tcfg = bertgpt.TrainConfig(steps=steps, batch_size=32, lr=1e-3, warmup=5, eval_every=10**9,
                               precision="fp32")  # as the bare loop: the loop is measured, not bf16
    batches = gpt_batches(stream, cfg.context, 32, torch.Generator().manual_seed(0))
    history = bertgpt.train(model, clm_loss, batches, tcfg, progress="bertgpt loop")
    return history.tokens_per_second


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cfg = bertgpt.model_config("mini", "gpt", vocab_size=100, dropout=0.0)
    torch.manual_seed(0)
    initial = bertgpt.build(cfg)
    stream = torch.randint(8, 100, (200_000,))
    bare_loop(copy.deepcopy(initial), stream, 5, cfg)  # warm-up: allocator, kernels
    speeds = {"bare": [], "bertgpt": []}
    for _ in range(args.rounds):
        speeds["bare"].append(bare_loop(copy.deepcopy(initial), stream, args.steps, cfg))
        speeds["bertgpt"].append(package_loop(copy.deepcopy(initial), stream, args.steps, cfg))
    best = {k: max(v) for k, v in speeds.items()}
    print(json.dumps(dict(bare_tokens_per_second=round(best["bare"]),
                          bertgpt_tokens_per_second=round(best["bertgpt"]),
                          ratio=round(best["bertgpt"] / best["bare"], 3), threads=torch.get_num_threads(),
                          shape=dict(n_layer=cfg.n_layer, d_model=cfg.d_model, context=cfg.context,
                                     vocab_size=cfg.vocab_size, batch_size=32))))


if __name__ == "__main__":
    main()
