"""Random-weight model pairs with the REAL shapes of published checkpoints, for benchmarks.

Speed depends on shapes, not on weight values, so a random Qwen3.5-9B with a 5-layer z-lab
draft measures decode and verify cost as the real one would, without a download. (Acceptance on
random weights is meaningless; use the shipped pair for tau.)

  .venv/bin/python tools/make_random_pair.py --config qwen3.5-9b --out artifacts/random-qwen3.5-9b
  .venv/bin/python tools/make_random_pair.py --shape qwen3-0.6b --out artifacts/random-qwen3-0.6b

writes OUT/target (config.json + bf16 safetensors as transformers saves the architecture:
Qwen3, Qwen3-MoE, Qwen3.5 and Qwen3.5-MoE text models) and OUT/draft (z-lab's DFlashDraftModel).
Tensors are written one at a time in row chunks (numpy only, no torch): peak memory is under 0.1 GB
whatever the model's size. --config takes a config.json (or its directory) or a data/pairs.json
name; see tools/random_weights/ for the layouts, the values and the file format.
"""
import argparse
import json
import os
import sys

from random_weights import configs, layout, writer

NOTE = "random weights (tools/make_random_pair.py, seed {seed}): for speed measurements only; {source}"


def write_model(out_dir, config, specs, args, label):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    size = sum(writer.nbytes(s) for s in specs)
    print(f"{label}: {len(specs)} tensors, {size / 2**30:.2f} GiB bf16 -> {out_dir}", file=sys.stderr)
    writer.write_checkpoint(out_dir, specs, args.seed, max_shard_bytes=int(args.shard_gb * 2**30), label=label)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", "--shape", dest="config", default="qwen3-0.6b",
                    help="config.json, its directory, a data/pairs.json name or qwen3-0.6b / qwen3-1.7b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, help="keep the first N target layers (widths and experts kept)")
    ap.add_argument("--draft-layers", type=int, help="draft layers (default: the registry's, else 5)")
    ap.add_argument("--no-draft", action="store_true", help="write the target only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard-gb", type=float, default=2.0, help="largest shard in GiB (default 2)")
    args = ap.parse_args()

    target, source, entry = configs.resolve_target(args.config)
    if args.layers:
        target = configs.reduce_layers(target, args.layers)
        source += f"; first {args.layers} layers"
    target["note"] = NOTE.format(seed=args.seed, source=source)
    layout_specs = layout.target_tensors(target)
    write_model(os.path.join(args.out, "target"), target, layout_specs, args, "target")
    if args.no_draft:
        return
    draft = configs.draft_config(target, entry, args.draft_layers)
    mask = draft["dflash_config"]["mask_token_id"]
    draft["note"] = NOTE.format(seed=args.seed, source=(
        f"z-lab DFlashDraftModel layout for that target; mask_token_id {mask} "
        + ("as z-lab's Qwen3 drafts" if mask == configs.QWEN3_MASK_TOKEN_ID else "(the last id: not a published value)")))
    write_model(os.path.join(args.out, "draft"), draft, layout.draft_tensors(draft), args, "draft")
    print(f"wrote {args.out}/target and {args.out}/draft", file=sys.stderr)


if __name__ == "__main__":
    main()
