"""Draft training data: text the trained target writes itself, so the draft learns the target's habits.

Each sequence is --seq tokens: a prompt (a random window of the training split, --min-prompt to
--max-prompt tokens, one length per shard so no padding is needed) followed by the target's own
continuation. Most shards decode greedily (what the engine's greedy mode verifies); a share is
sampled at temperature --temperature so the draft also sees the target's less likely paths.
No stop tokens: the target is a plain code model, a continuation past <|endoftext|> is still its text.
Only tokens are stored; train_draft.py recomputes the target's hidden states.

Work is split in shards of --batch sequences decoded together (transformers generate, KV cache);
shard i draws its prompts from its own seed (--seed, i), is written to work/gen_shards/ as soon as
it is done, and is skipped when rerun, so an interrupted run resumes and a larger --sequences
extends an earlier run with the same sequences first. --part K/N makes this process decode only
the shards whose index is K mod N, so N one-thread processes can share the cores (on a busy
machine that beats one N-thread process); the run that finds every shard present writes gen.npz.

  .venv-ref/bin/python tools/pair/gen_data.py  ->  work/gen.npz (tokens [N, seq] uint16, prompt_len [N])
"""
import argparse
import os

import numpy as np
import torch
from transformers import Qwen3ForCausalLM

from common import MODELS, WORK, Log, load_tokens, setup_torch


def generate_shard(target, train, a, shard):
    rng = np.random.default_rng([a.seed, shard])
    plen = int(rng.integers(a.min_prompt, a.max_prompt + 1))
    starts = rng.integers(0, len(train) - plen, size=a.batch)
    prompts = torch.from_numpy(np.stack([train[s:s + plen] for s in starts]).astype(np.int64))
    do_sample = bool(rng.random() < a.sampled_share)
    torch.manual_seed(a.seed * 100003 + shard)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = target.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=do_sample,
                              temperature=a.temperature if do_sample else None, top_p=None, top_k=None,
                              max_new_tokens=a.seq - plen, min_new_tokens=a.seq - plen,
                              eos_token_id=None, pad_token_id=0)
    return out.numpy().astype(np.uint16), plen, do_sample


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(MODELS, "target"))
    ap.add_argument("--sequences", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=256, help="sequences per shard, decoded as one batch")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--min-prompt", type=int, default=16)
    ap.add_argument("--max-prompt", type=int, default=96)
    ap.add_argument("--sampled-share", type=float, default=0.25)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--part", default="0/1", help="K/N: decode only shards with index K mod N")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(WORK, "gen.npz"))
    a = ap.parse_args()
    if a.sequences % a.batch:
        raise SystemExit(f"--sequences {a.sequences} is not a multiple of --batch {a.batch}")
    try:
        part, parts = (int(v) for v in a.part.split("/"))
    except ValueError:
        raise SystemExit(f"--part {a.part!r}: expected K/N, e.g. 0/2")
    if not 0 <= part < parts:
        raise SystemExit(f"--part {a.part}: K must be in 0..N-1")
    setup_torch(a.threads, a.seed)
    log = Log()
    train = load_tokens("train.bin")
    # The saved bf16 weights, upcast: the same numbers the engine computes with.
    target = Qwen3ForCausalLM.from_pretrained(a.target, dtype=torch.float32).eval()
    shard_dir = os.path.join(WORK, "gen_shards")
    os.makedirs(shard_dir, exist_ok=True)
    paths = [os.path.join(shard_dir, f"s{a.seed}_b{a.batch}_n{a.seq}_{i:04d}.npz") for i in range(a.sequences // a.batch)]
    for shard, path in enumerate(paths):
        if shard % parts == part and not os.path.exists(path):
            tokens, plen, do_sample = generate_shard(target, train, a, shard)
            np.savez(path + ".tmp.npz", tokens=tokens, prompt_len=plen, sampled=do_sample)
            os.replace(path + ".tmp.npz", path)
            log(f"shard {shard}: {len(tokens)} sequences (prompt {plen}, {'sampled' if do_sample else 'greedy'})")
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        log(f"{len(missing)} shards still to come from the other parts; gen.npz not written")
        return
    rows, prompt_lens, sampled = [], [], []
    for path in paths:
        d = np.load(path)
        rows.append(d["tokens"])
        prompt_lens.extend([int(d["prompt_len"])] * len(d["tokens"]))
        sampled.extend([bool(d["sampled"])] * len(d["tokens"]))
    tokens = np.concatenate(rows)
    np.savez(a.out, tokens=tokens, prompt_len=np.array(prompt_lens, dtype=np.int32), sampled=np.array(sampled))
    log(f"wrote {a.out}: {tokens.shape[0]} x {tokens.shape[1]} tokens, {np.mean(sampled):.0%} sampled")


if __name__ == "__main__":
    main()
