"""Prediction accuracy of `dflash plan --calibrate` (a benchmark, not a test): for each pair and
context, calibrate on synthetic weights of the pair's shapes, then measure the real checkpoint
with `dflash bench --acceptance` (scripted acceptance matching the prediction's tau, so the
comparison tests the costs, not the draft), in one run, and print predicted vs measured tok/s.

  .venv/bin/python bench/plan_accuracy.py \\
      --pair toy=models/dflash-pair --pair qwen3-0.6b=artifacts/random-qwen3-0.6b \\
      --contexts 512,4096 --task agent -t 2

A PAIR directory holds target/ and draft/ (tools/make_random_pair.py writes that layout; the
shipped pair has it). Each pair's shapes go into a registry written next to the results, so plan
calibrates exactly the checkpoint's shapes.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shape(config, draft=False):
    s = {k: config[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                "num_key_value_heads", "head_dim")}
    s["architecture"] = "DFlashDraftModel" if draft else config["architectures"][0]
    s["vocab_size"] = 0 if draft else config["vocab_size"]
    s["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))
    if draft:
        s["capture_layers"] = len(config.get("dflash_config", {}).get("target_layer_ids") or config["target_layer_ids"])
        s["block_size"] = config.get("block_size", 16)
    return s


def registry(pairs, out):
    r = json.loads((ROOT / "data" / "pairs.json").read_text())
    template = next(p for p in r["pairs"] if p["name"] == "qwen3-4b")
    entries = []
    for name, path in pairs:
        e = json.loads(json.dumps(template))
        e["name"] = name
        for side, draft in (("target", False), ("draft", True)):
            cfg = json.loads((Path(path) / side / "config.json").read_text())
            e[side].update(id=f"local/{name}-{side}", verified=False, note=f"shapes of {path}/{side}", shape=shape(cfg, draft))
            e[side].pop("config", None)
        entries.append(e)
    r["pairs"] = entries
    out.write_text(json.dumps(r, indent=1))
    return out


def run(cmd):
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{res.stderr}")
    return res.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", required=True, help="NAME=DIR (DIR/target, DIR/draft)")
    ap.add_argument("--contexts", default="512,4096")
    ap.add_argument("--task", default="agent", help="plan's --task and bench's --acceptance profile")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--new-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quant", default="q8_0")
    ap.add_argument("--out", default="bench/results/plan-accuracy")
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin" / "dflash"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = [p.split("=", 1) for p in args.pair]
    reg = registry(pairs, out / "pairs.json")
    rows = []
    for name, path in pairs:
        vocab = json.loads((Path(path) / "target" / "config.json").read_text())["vocab_size"]
        for ctx in map(int, args.contexts.split(",")):
            # Prompts ending half the generation before the context: decoding runs around it.
            rng = random.Random(ctx)
            length = max(8, ctx - args.new_tokens // 2)
            prompts = out / f"{name}-{ctx}.jsonl"
            prompts.write_text("".join(json.dumps({"name": f"p{i}", "prompt_ids": [rng.randrange(vocab - 2) for _ in range(length)]}) + "\n"
                                       for i in range(args.prompts)))
            t0 = time.time()
            plan = json.loads(run([args.bin, "plan", "--registry", reg, "--pair", name, "--context", ctx, "--task", args.task,
                                   "--memory-gb", "64", "--bandwidth-gbs", "1", "-t", args.threads, "--calibrate",
                                   "--format", "json"]))
            (out / f"{name}-{ctx}-plan.json").write_text(json.dumps(plan, indent=1))
            p = plan["prediction"]
            measured = {}
            for policy in ("always", "adaptive"):
                jpath = out / f"{name}-{ctx}-{policy}.json"
                run([args.bin, "bench", "-m", Path(path) / "target", "-d", Path(path) / "draft", "--prompts", prompts,
                     "-n", args.new_tokens, "--repeats", args.repeats, "--warmup", 1, "-t", args.threads,
                     "--target-quant", args.quant, "--draft-quant", args.quant, "--ctx", ctx + 2 * args.new_tokens,
                     "--acceptance", args.task, "--spec-policy", policy, "--json", jpath])
                measured[policy] = json.loads(jpath.read_text())["mean"]
            rows.append(dict(pair=name, context=ctx, seconds=round(time.time() - t0),
                             plain_pred=p["plain_tok_s"], plain_meas=measured["always"]["plain_decode_tok_s"],
                             always_pred=p["dflash_full_block_tok_s"], always_meas=measured["always"]["dflash_decode_tok_s"],
                             adaptive_pred=p["dflash_tok_s"], adaptive_meas=measured["adaptive"]["dflash_decode_tok_s"],
                             tau_meas=measured["always"]["tau"], rows=p["verify_rows"]))
            print(json.dumps(rows[-1]), flush=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1))
    print("\n| pair | context | plain pred / meas tok/s | err | DFlash always pred / meas | err | adaptive pred / meas | err | tau meas | pred rows |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    err = lambda a, b: f"{100 * (a / b - 1):+.0f}%" if b else "n/a"
    for r in rows:
        print(f"| {r['pair']} | {r['context']} | {r['plain_pred']:.1f} / {r['plain_meas']:.1f} | {err(r['plain_pred'], r['plain_meas'])} "
              f"| {r['always_pred']:.1f} / {r['always_meas']:.1f} | {err(r['always_pred'], r['always_meas'])} "
              f"| {r['adaptive_pred']:.1f} / {r['adaptive_meas']:.1f} | {err(r['adaptive_pred'], r['adaptive_meas'])} "
              f"| {r['tau_meas']:.2f} | {r['rows']} |")


if __name__ == "__main__":
    main()
