"""Prediction accuracy of `dflash plan --calibrate` (a benchmark, not a test): for each pair and
context, calibrate on synthetic weights of the pair's shapes, then measure the real checkpoint
with `dflash bench --acceptance` (scripted acceptance from the profile the prediction assumes,
so the comparison tests the costs, not the draft), and print predicted vs measured tok/s.

This machine's speed moves by tens of percent within minutes when others use it, so
calibration and measurement are interleaved: every round calibrates and measures each cell
(pair x context) back to back, rounds repeat, and the table gives medians with the
repeat-to-repeat spread of both. A prediction error is only meaningful against that spread.

  .venv/bin/python bench/plan_accuracy.py \\
      --pair toy=models/dflash-pair --pair qwen3-0.6b=artifacts/random-qwen3-0.6b \\
      --contexts 512,4096 --task agent -t 2 --rounds 3

A PAIR directory holds target/ and draft/ (tools/make_random_pair.py writes that layout; the
shipped pair has it). Each pair's shapes go into a registry written next to the results, so plan
calibrates exactly the checkpoint's shapes.

DFlash tok/s is compared two ways: as predicted at the profile's tau, and "tau-matched": scaled by
the tau the run measured over the profile's (a full-block cycle's cost hardly depends on how
many tokens it commits, so its rate is proportional to tau), which takes the acceptance's
sampling noise in a short run out of the comparison of costs.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_ERROR = 0.15


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


def load():
    return os.getloadavg()[0]


def spread(values):
    """(max - min) / median: how far apart repeats of the same quantity landed."""
    m = statistics.median(values)
    return (max(values) - min(values)) / m if m else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", required=True, help="NAME=DIR (DIR/target, DIR/draft)")
    ap.add_argument("--contexts", default="512,4096")
    ap.add_argument("--task", default="agent", help="plan's --task and bench's --acceptance profile")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--new-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3, help="calibrate + measure rounds per cell, interleaved")
    ap.add_argument("--policy", default="always", help="bench's --spec-policy (always: the full-block prediction)")
    ap.add_argument("--quant", default="q8_0")
    ap.add_argument("--out", default="bench/results/plan-accuracy")
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin" / "dflash"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = [p.split("=", 1) for p in args.pair]
    reg = registry(pairs, out / "pairs.json")
    cells = [(name, path, ctx) for name, path in pairs for ctx in map(int, args.contexts.split(","))]
    for name, path, ctx in cells:
        # One prompt ending half the generation before the context: decoding runs around it.
        vocab = json.loads((Path(path) / "target" / "config.json").read_text())["vocab_size"]
        rng = random.Random(ctx)
        ids = [rng.randrange(vocab - 2) for _ in range(max(8, ctx - args.new_tokens // 2))]
        (out / f"{name}-{ctx}.jsonl").write_text(json.dumps({"name": "p0", "prompt_ids": ids}) + "\n")
    samples = {(name, ctx): [] for name, _, ctx in cells}
    for rnd in range(args.rounds):
        for name, path, ctx in cells:
            t0, load0 = time.time(), load()
            plan = json.loads(run([args.bin, "plan", "--registry", reg, "--pair", name, "--context", ctx, "--task", args.task,
                                   "--memory-gb", "64", "--bandwidth-gbs", "1", "-t", args.threads, "--calibrate",
                                   "--format", "json"]))
            (out / f"{name}-{ctx}-plan-{rnd}.json").write_text(json.dumps(plan, indent=1))
            jpath = out / f"{name}-{ctx}-bench-{rnd}.json"
            run([args.bin, "bench", "-m", Path(path) / "target", "-d", Path(path) / "draft", "--prompts", out / f"{name}-{ctx}.jsonl",
                 "-n", args.new_tokens, "--repeats", 1, "--warmup", 0, "-t", args.threads, "--target-quant", args.quant,
                 "--draft-quant", args.quant, "--ctx", ctx + 2 * args.new_tokens, "--acceptance", args.task,
                 "--spec-policy", args.policy, "--no-eos", "--json", jpath])
            meas = json.loads(jpath.read_text())["mean"]
            p = plan["prediction"]
            dflash_pred = p["dflash_full_block_tok_s"] if args.policy == "always" else p["dflash_tok_s"]
            s = dict(round=rnd, seconds=round(time.time() - t0), load=round((load0 + load()) / 2, 1),
                     plain_pred=p["plain_tok_s"], plain_meas=meas["plain_decode_tok_s"],
                     dflash_pred=dflash_pred, dflash_meas=meas["dflash_decode_tok_s"],
                     dflash_pred_tau_matched=dflash_pred * meas["tau"] / p["tau"],
                     tau_pred=p["tau"], tau_meas=meas["tau"], step_ms=p["step_ms"], pick_ms=p["pick_ms"],
                     append_ms=p["append_ms"], draft_ms=p["draft_ms"])
            samples[(name, ctx)].append(s)
            print(json.dumps(dict(pair=name, context=ctx, **s)), flush=True)
    (out / "samples.json").write_text(json.dumps({f"{k[0]}@{k[1]}": v for k, v in samples.items()}, indent=1))

    print(f"\npolicy {args.policy}, task {args.task}, {args.rounds} rounds, {args.new_tokens} new tokens, -t {args.threads}, "
          f"{args.quant}; medians over rounds; spread = (max - min) / median of the rounds\n")
    print("| pair | context | load | plain pred / meas tok/s | err | spread pred / meas "
          "| DFlash pred / meas tok/s | err | tau-matched err | spread pred / meas | tau pred / meas |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    med = lambda rows, k: statistics.median(r[k] for r in rows)
    pct = lambda x: f"{100 * x:+.0f}%"
    verdicts = []
    for (name, ctx), rows in samples.items():
        plain_err = med(rows, "plain_pred") / med(rows, "plain_meas") - 1
        dflash_err = med(rows, "dflash_pred") / med(rows, "dflash_meas") - 1
        matched_err = med(rows, "dflash_pred_tau_matched") / med(rows, "dflash_meas") - 1
        sp = {k: spread([r[k] for r in rows]) for k in ("plain_pred", "plain_meas", "dflash_pred", "dflash_meas")}
        loads = [r["load"] for r in rows]
        print(f"| {name} | {ctx} | {min(loads):.0f}-{max(loads):.0f} "
              f"| {med(rows, 'plain_pred'):.1f} / {med(rows, 'plain_meas'):.1f} | {pct(plain_err)} "
              f"| {100 * sp['plain_pred']:.0f}% / {100 * sp['plain_meas']:.0f}% "
              f"| {med(rows, 'dflash_pred'):.1f} / {med(rows, 'dflash_meas'):.1f} | {pct(dflash_err)} | {pct(matched_err)} "
              f"| {100 * sp['dflash_pred']:.0f}% / {100 * sp['dflash_meas']:.0f}% "
              f"| {med(rows, 'tau_pred'):.2f} / {med(rows, 'tau_meas'):.2f} |")
        for what, err, noise in (("plain", plain_err, max(sp["plain_pred"], sp["plain_meas"])),
                                 ("DFlash (tau-matched)", matched_err, max(sp["dflash_pred"], sp["dflash_meas"]))):
            if abs(err) > TARGET_ERROR:
                verdicts.append(f"{name} @ {ctx} {what}: error {pct(err)} beyond 15%; "
                                f"{'within' if abs(err) <= noise else 'beyond'} the rounds' spread of {100 * noise:.0f}%")
    print("\n" + ("\n".join(verdicts) if verdicts else "every error within 15%"))


if __name__ == "__main__":
    main()
