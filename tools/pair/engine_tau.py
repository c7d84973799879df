"""Tau of our C++ engine on the same held-out prompts eval_tau.py used (work/eval_prompts/*.txt).

Runs `dflash generate --compare --no-eos --spec-policy always --json` per prompt (greedy) and pools
tokens per cycle over all cycles, so the number is comparable with eval_tau.json's "tau". The
policy must be `always`: the adaptive default falls back to plain steps on prompts where the draft
does badly, and tokens per cycle would then count only the cycles that speculated.
Standard library only.

  python3 tools/pair/engine_tau.py --bin build/bin/dflash
"""
import argparse
import glob
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")  # as common.py, which needs numpy/torch
MODELS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models", "dflash-pair")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bin/dflash")
    ap.add_argument("--target", default=os.path.join(MODELS, "target"))
    ap.add_argument("--draft", default=os.path.join(MODELS, "draft"))
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    tokens = cycles = 0
    identical = True
    prompts = sorted(glob.glob(os.path.join(WORK, "eval_prompts", "*.txt")))
    if not prompts:
        raise SystemExit(f"no prompts in {WORK}/eval_prompts: run eval_tau.py first")
    for path in prompts:
        out = subprocess.run([a.bin, "generate", "-m", a.target, "-d", a.draft, "--prompt-ids", "@" + path,
                              "-n", str(a.new), "--no-eos", "--spec-policy", "always", "--compare", "--json", "-t", str(a.threads)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        d = r["dflash"]
        tokens += d["tokens_per_cycle"] * d["cycles"]  # the engine's own count, prefill token excluded
        cycles += d["cycles"]
        identical &= r["identical"]
        print(f"{os.path.basename(path)}: tokens/cycle {d['tokens_per_cycle']:.2f}, identical {r['identical']}, "
              f"plain {r['plain']['decode_tok_s']:.0f} tok/s, dflash {d['decode_tok_s']:.0f} tok/s")
    print(json.dumps({"prompts": len(prompts), "tau": tokens / cycles, "all_identical": identical}))


if __name__ == "__main__":
    main()
