"""Python reference numbers for the shipped pair: DFlash acceptance (tau) and target repetitiveness.

Prompts are fixed windows of the held-out split (files the target never trained on). For each,
z-lab's dflash_generate (greedy, no stop tokens) decodes --new tokens with the draft and records
tokens per cycle; tau = mean over all cycles of all prompts. The output is also checked against the
target's own greedy decode (transformers generate), which it must equal. Repetitiveness: the
fraction of distinct 4-grams among the continuation's 4-grams (1.0 = nothing repeats).
A small target's greedy text loops, which inflates greedy tau, so a second pass samples at
--temperature (z-lab's rejection sampling, still lossless in distribution) and reports its tau too.
The prompts go to work/eval_prompts/NN.txt (comma-separated ids) for the C++ engine's --prompt-ids @FILE,
and all of them to work/eval_prompts.jsonl for `dflash bench --prompts`.

  .venv-ref/bin/python tools/pair/eval_tau.py  ->  work/eval_tau.json
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import dflash.model as zlab
from transformers import Qwen3ForCausalLM

from common import MODELS, WORK, Log, load_tokens, setup_torch


def distinct_4gram_fraction(ids):
    grams = [tuple(ids[i:i + 4]) for i in range(len(ids) - 3)]
    return len(set(grams)) / max(1, len(grams))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(MODELS, "target"))
    ap.add_argument("--draft", default=os.path.join(MODELS, "draft"))
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    setup_torch(a.threads, 0)
    zlab._cuda_time = time.perf_counter  # its timer synchronises CUDA; this runs on the CPU
    log = Log()
    target = Qwen3ForCausalLM.from_pretrained(a.target, dtype=torch.float32).eval()
    draft = zlab.DFlashDraftModel.from_pretrained(a.draft, dtype=torch.float32).eval()
    held = load_tokens("heldout.bin")
    stride = (len(held) - a.prompt_len) // a.prompts
    os.makedirs(os.path.join(WORK, "eval_prompts"), exist_ok=True)
    prompts = [held[p * stride:p * stride + a.prompt_len].astype(np.int64) for p in range(a.prompts)]
    with open(os.path.join(WORK, "eval_prompts.jsonl"), "w") as jsonl:
        for p, ids in enumerate(prompts):
            with open(os.path.join(WORK, "eval_prompts", f"{p:02d}.txt"), "w") as f:
                f.write(",".join(map(str, ids)))
            jsonl.write(json.dumps({"name": f"heldout{p:02d}", "prompt_ids": ids.tolist()}) + "\n")
    per_prompt, cycles, lossless = [], [], True
    for p, ids in enumerate(prompts):
        x = torch.from_numpy(ids)[None]
        stats = zlab.dflash_generate(draft, target, x, a.new, None, return_stats=True)
        with torch.no_grad():
            plain = target.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=a.new,
                                    min_new_tokens=a.new, eos_token_id=None, pad_token_id=0)
        spec = stats.output_ids[0].tolist()
        same = spec == plain[0].tolist()
        lossless &= same
        cont = spec[a.prompt_len:]
        tau = float(np.mean(stats.acceptance_lengths))
        cycles.extend(stats.acceptance_lengths)
        per_prompt.append({"prompt": p, "tau": tau, "cycles": len(stats.acceptance_lengths),
                           "distinct_4gram": distinct_4gram_fraction(cont), "matches_plain_greedy": same})
        log(f"prompt {p}: tau {tau:.2f}, distinct 4-grams {per_prompt[-1]['distinct_4gram']:.2f}, "
            f"{'==' if same else '!='} plain greedy")
    torch.manual_seed(0)
    sampled_cycles, sampled_distinct = [], []
    for ids in prompts:
        x = torch.from_numpy(ids)[None]
        stats = zlab.dflash_generate(draft, target, x, a.new, None, temperature=a.temperature, return_stats=True)
        sampled_cycles.extend(stats.acceptance_lengths)
        sampled_distinct.append(distinct_4gram_fraction(stats.output_ids[0, a.prompt_len:].tolist()))
    log(f"sampled at T={a.temperature}: tau {np.mean(sampled_cycles):.3f}, distinct 4-grams {np.mean(sampled_distinct):.3f}")
    result = {"prompts": a.prompts, "prompt_len": a.prompt_len, "new_tokens": a.new, "block_size": draft.block_size,
              "tau": float(np.mean(cycles)), "tau_per_prompt_mean": float(np.mean([r["tau"] for r in per_prompt])),
              "distinct_4gram_mean": float(np.mean([r["distinct_4gram"] for r in per_prompt])),
              "all_match_plain_greedy": lossless,
              "sampled": {"temperature": a.temperature, "tau": float(np.mean(sampled_cycles)),
                          "distinct_4gram_mean": float(np.mean(sampled_distinct))},
              "per_prompt": per_prompt}
    with open(os.path.join(WORK, "eval_tau.json"), "w") as f:
        json.dump(result, f, indent=2)
    log(f"tau {result['tau']:.3f} over {len(cycles)} cycles; distinct 4-grams {result['distinct_4gram_mean']:.3f}; "
        f"lossless {lossless}")


if __name__ == "__main__":
    main()
