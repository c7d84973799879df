"""Peak RSS of loading a MoE target with load-time quantisation: at most the file size plus the KV
cache plus 1 GiB (issue 32), i.e. the quantised experts never exist beside a second full copy.

Writes a random Qwen3-MoE target of a few hundred MB (bf16, per-expert tensors, the streaming
generator of tools/random_weights/), runs `dflash bench --verify-cost` on it with
--target-quant q4_k (load, quantise, pack, then 1- and 16-row passes) and compares the peak RSS
the binary reports with the bound. Exits 1 when the bound is broken.

  .venv/bin/python tools/check_moe_load_rss.py --dflash build/bin/dflash --out /tmp/moe-rss
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Top-8 routing as Qwen3-30B-A3B, on a narrower, shorter model with fewer experts, so that
# the file is a few hundred MB: almost all of it experts, as in the real one.
CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 32000,
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 2, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 64, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
    "rope_theta": 1000000.0, "tie_word_embeddings": False, "num_experts": 64, "num_experts_per_tok": 8,
    "moe_intermediate_size": 512, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "torch_dtype": "bfloat16",
}
CONTEXT = 1024
GIB = 1 << 30


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dflash", default="build/bin/dflash")
    ap.add_argument("--out", default="/tmp/moe-rss")
    ap.add_argument("--quant", default="q4_k")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    config_path = os.path.join(args.out, "config.json")
    with open(config_path, "w") as f:
        json.dump(CONFIG, f, indent=2)
    target = os.path.join(args.out, "target")
    if not glob.glob(os.path.join(target, "*.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_random_pair.py"), "--config", config_path,
                        "--out", args.out, "--no-draft"], check=True)
    file_bytes = sum(os.path.getsize(p) for p in glob.glob(os.path.join(target, "*.safetensors")))
    c = CONFIG
    # f16 KV (the CPU default without bf16 dot products; a bf16 cache is the same size).
    kv_bytes = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * CONTEXT * 2
    cmd = [args.dflash, "bench", "--verify-cost", "-m", target, "--target-quant", args.quant, "--contexts", "512",
           "--rows", "1,16", "--repeats", "2", "-c", str(CONTEXT), "-t", "2"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    peak = float(re.findall(r"peak RSS (\d+) MiB", out)[-1]) * (1 << 20)
    bound = file_bytes + kv_bytes + GIB
    print(out)
    print(f"file {file_bytes / GIB:.3f} GiB, KV {kv_bytes / GIB:.3f} GiB, peak RSS {peak / GIB:.3f} GiB, "
          f"bound (file + KV + 1 GiB) {bound / GIB:.3f} GiB: {'ok' if peak <= bound else 'EXCEEDED'}")
    return 0 if peak <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
