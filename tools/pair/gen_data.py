"""Draft training data: text the trained target writes itself, so the draft learns the target's habits.

Each sequence is --seq tokens: a prompt (a random window of the training split, --min-prompt to
--max-prompt tokens, one length per batch so no padding is needed) followed by the target's own
continuation. Most batches decode greedily (what the engine's greedy mode verifies); a share is
sampled at temperature --temperature so the draft also sees the target's less likely paths.
No stop tokens: the target is a plain code model, a continuation past <|endoftext|> is still its text.
Only tokens are stored; train_draft.py recomputes the target's hidden states.

  .venv-ref/bin/python tools/pair/gen_data.py  ->  work/gen.npz (tokens [N, seq] uint16, prompt_len [N])
"""
import argparse
import os

import numpy as np
import torch
from transformers import Qwen3ForCausalLM

from common import MODELS, WORK, Log, load_tokens, setup_torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(MODELS, "target"))
    ap.add_argument("--sequences", type=int, default=1536)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--min-prompt", type=int, default=16)
    ap.add_argument("--max-prompt", type=int, default=96)
    ap.add_argument("--sampled-share", type=float, default=0.25)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(WORK, "gen.npz"))
    a = ap.parse_args()
    setup_torch(a.threads, a.seed)
    log = Log()
    train = load_tokens("train.bin")
    # The saved bf16 weights, upcast: the same numbers the engine computes with.
    target = Qwen3ForCausalLM.from_pretrained(a.target, dtype=torch.float32).eval()
    rng = np.random.default_rng(a.seed)
    rows, prompt_lens, sampled = [], [], []
    while len(rows) < a.sequences:
        n = min(a.batch, a.sequences - len(rows))
        plen = int(rng.integers(a.min_prompt, a.max_prompt + 1))
        starts = rng.integers(0, len(train) - plen, size=n)
        prompts = torch.from_numpy(np.stack([train[s:s + plen] for s in starts]).astype(np.int64))
        do_sample = rng.random() < a.sampled_share
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = target.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=do_sample,
                                  temperature=a.temperature if do_sample else None, top_p=None, top_k=None,
                                  max_new_tokens=a.seq - plen, min_new_tokens=a.seq - plen,
                                  eos_token_id=None, pad_token_id=0)
        rows.extend(out.numpy().astype(np.uint16))
        prompt_lens.extend([plen] * n)
        sampled.extend([do_sample] * n)
        log(f"{len(rows)}/{a.sequences} sequences (prompt {plen}, {'sampled' if do_sample else 'greedy'})")
    np.savez(a.out, tokens=np.stack(rows), prompt_len=np.array(prompt_lens, dtype=np.int32),
             sampled=np.array(sampled))
    log(f"wrote {a.out}: {len(rows)} x {a.seq} tokens")


if __name__ == "__main__":
    main()
