"""Per-cycle acceptance on the shipped pair (models/dflash-pair) from z-lab's own loop, for the
draft-side tests: the fixture drafts accept almost nothing, so comparing cycles with them never
exercises a rollback after partial acceptance. The shipped draft accepts at many lengths.

  tests/goldens/pair_acceptance.json   per prompt (the first prompts of
                                       bench/prompts/pair-heldout.jsonl, cut to PROMPT_TOKENS):
                                       z-lab dflash_generate's greedy output (block 16,
                                       max_new_tokens NEW, no stop tokens) and its
                                       acceptance_lengths, one per cycle

transformers runs the pair in float32 (its bf16 weights upcast exactly), as dflash.cpp's f32
path does. The script checks that the lengths cover at least 10 of 1..16.

Run with the reference venv:  .venv-ref/bin/python tools/make_pair_acceptance_goldens.py
"""
import argparse
import json
import time

import torch
from transformers import Qwen3ForCausalLM

import dflash.model as zlab
from dflash.model import DFlashDraftModel

PROMPTS = 5
PROMPT_TOKENS = 48
NEW = 160


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="models/dflash-pair")
    ap.add_argument("--prompts", default="bench/prompts/pair-heldout.jsonl")
    ap.add_argument("--out", default="tests/goldens/pair_acceptance.json")
    args = ap.parse_args()
    target = Qwen3ForCausalLM.from_pretrained(f"{args.pair}/target", dtype=torch.float32).eval()
    draft = DFlashDraftModel.from_pretrained(f"{args.pair}/draft", dtype=torch.float32).eval()
    zlab._cuda_time = time.perf_counter  # z-lab times cycles with torch.cuda.synchronize
    with open(args.prompts) as f:
        rows = [json.loads(line) for line in f][:PROMPTS]
    out = {"pair": args.pair, "block_size": draft.block_size, "max_new_tokens": NEW, "prompts": []}
    lengths = set()
    for row in rows:
        prompt = torch.tensor([row["prompt_ids"][:PROMPT_TOKENS]])
        res = zlab.dflash_generate(draft, target, prompt, max_new_tokens=NEW, stop_token_ids=None,
                                   temperature=0.0, return_stats=True)
        out["prompts"].append({"name": row["name"], "prompt_ids": prompt[0].tolist(),
                               "output": res.output_ids[0, prompt.shape[1]:].tolist(),
                               "acceptance_lengths": res.acceptance_lengths})
        lengths.update(res.acceptance_lengths)
        print(row["name"], res.acceptance_lengths, flush=True)
    print("lengths seen:", sorted(lengths))
    assert len(lengths) >= 10, f"only {sorted(lengths)}: the goldens would not cover partial acceptance"
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
