#!/usr/bin/env python3
"""MLX-quantised Qwen3 fixtures and goldens, quantised and dequantised by the `mlx` package and
run by transformers, never by our code.

  tests/fixtures/<name>/              an mlx-lm style directory: config.json with
                                      "quantization", model.safetensors written by
                                      mx.save_safetensors (uint32 weights + scales + biases)
  tests/goldens/mlx/<name>.safetensors  transformers' logits / hidden states / greedy tokens for
                                      the model whose weights are mx.dequantize of the fixture's
  tests/goldens/mlx/dequant.safetensors mx.quantize'd random matrices, mx.dequantize of them,
                                      and mx.quantized_matmul of random activations
  tests/goldens/mlx/manifest.json     the cases above

The reference dequantises in f32 (scales and biases cast to f32 first, which is exact): the
affine map scale * q + bias that MLX defines, without mx.dequantize's extra rounding of every
weight to the scales' dtype when they are bf16/f16.

Run with the reference venv (torch, transformers, mlx):
  .venv-ref/bin/python tools/make_mlx_fixtures.py
"""
import argparse
import json
import os
import pathlib
import shutil

import mlx.core as mx
import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from make_fixtures import PROMPTS, perturb_norms, target_goldens

BASE = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
            max_position_embeddings=512, initializer_range=0.1, bos_token_id=None,
            eos_token_id=254, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})

MX_DTYPES = {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}

FIXTURES = {
    # The mlx-community default: 4 bits, groups of 64, bf16 scales, embedding and head quantised.
    "qwen3-mlx4-g64": dict(dtype="bfloat16", bits=4, group=64, cfg=dict(tie_word_embeddings=False)),
    # 8 bits, groups of 32, f32 scales, tied (quantised) embedding as the LM head.
    "qwen3-mlx8-g32": dict(dtype="float32", bits=8, group=32, cfg=dict(tie_word_embeddings=True)),
    # 4 bits, groups of 128, f16 scales, mixed: down_proj at 8 bits / 64, lm_head unquantised.
    "qwen3-mlx4-g128-mixed": dict(dtype="float16", bits=4, group=128, cfg=dict(tie_word_embeddings=False),
                                  override={"mlp.down_proj": {"group_size": 64, "bits": 8}},
                                  skip=["lm_head"]),
}

DEQUANT_ROWS, DEQUANT_COLS = 5, 384


def to_numpy(a):
    return np.array(a.astype(mx.float32)) if a.dtype in (mx.bfloat16, mx.float16) else np.array(a)


def dequantize_f32(q, s, b, group, bits):
    return np.array(mx.dequantize(q, s.astype(mx.float32), b.astype(mx.float32), group_size=group, bits=bits))


def module_scheme(module, spec):
    if module in spec.get("skip", []):
        return None
    for suffix, o in spec.get("override", {}).items():
        if module.endswith(suffix):
            return o["bits"], o["group_size"]
    return spec["bits"], spec["group"]


def make_fixture(name, spec, out_dir, gold_dir, seed):
    cfg = dict(BASE, **spec["cfg"])
    model = Qwen3ForCausalLM(Qwen3Config(**cfg)).eval()
    perturb_norms(model, torch.Generator().manual_seed(seed))
    dtype = MX_DTYPES[spec["dtype"]]
    saved, dequantized = {}, {}
    quant_cfg = {"group_size": spec["group"], "bits": spec["bits"], "mode": "affine"}
    for pname, p in model.state_dict().items():
        if pname == "lm_head.weight" and cfg["tie_word_embeddings"]:
            continue
        w = mx.array(p.detach().float().numpy()).astype(dtype)
        module = pname.removesuffix(".weight")
        scheme = module_scheme(module, spec) if p.dim() == 2 else None
        if scheme is None:
            saved[pname] = w
            dequantized[pname] = to_numpy(w)
            continue
        bits, group = scheme
        if (bits, group) != (spec["bits"], spec["group"]):
            quant_cfg[module] = {"group_size": group, "bits": bits}
        q, s, b = mx.quantize(w, group_size=group, bits=bits)
        saved[pname] = q
        saved[module + ".scales"] = s
        saved[module + ".biases"] = b
        dequantized[pname] = dequantize_f32(q, s, b, group, bits)
    path = out_dir / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    mx.save_safetensors(str(path / "model.safetensors"), saved, metadata={"format": "mlx"})
    config = Qwen3Config(**cfg).to_dict()
    config["architectures"] = ["Qwen3ForCausalLM"]
    config["quantization"] = quant_cfg
    config["quantization_config"] = quant_cfg
    with open(path / "config.json", "w") as f:
        json.dump(config, f, indent=2)

    reference = Qwen3ForCausalLM(Qwen3Config(**cfg)).eval()
    state = {k: torch.from_numpy(v.copy()) for k, v in dequantized.items()}
    if cfg["tie_word_embeddings"]:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    reference.load_state_dict(state, strict=True)
    goldens = {k: v.numpy() for k, v in target_goldens(reference).items()}
    save_file(goldens, str(gold_dir / f"{name}.safetensors"))
    return {"golden": f"{name}.safetensors", "bits": spec["bits"], "group_size": spec["group"],
            "scales": spec["dtype"]}


def dequant_goldens(gold_dir, rng):
    """Random matrices through mx.quantize / mx.dequantize / mx.quantized_matmul."""
    tensors, cases = {}, []
    x = rng.standard_normal((3, DEQUANT_COLS)).astype(np.float32)
    tensors["x"] = mx.array(x)
    for bits in (4, 8):
        for group in (32, 64, 128):
            for dtype in ("float32", "bfloat16", "float16"):
                w = rng.standard_normal((DEQUANT_ROWS, DEQUANT_COLS)).astype(np.float32) * 0.05
                w[1] *= 1e-3        # small magnitudes
                w[2, :group] = 0.7  # a constant group (scale 0 in MLX's affine fit)
                wm = mx.array(w).astype(MX_DTYPES[dtype])
                q, s, b = mx.quantize(wm, group_size=group, bits=bits)
                key = f"b{bits}_g{group}_{dtype}"
                tensors[key + ".weight"] = q
                tensors[key + ".scales"] = s
                tensors[key + ".biases"] = b
                tensors[key + ".dequant"] = mx.array(dequantize_f32(q, s, b, group, bits))
                tensors[key + ".matmul"] = mx.quantized_matmul(
                    mx.array(x), q, s.astype(mx.float32), b.astype(mx.float32), transpose=True,
                    group_size=group, bits=bits)
                cases.append({"key": key, "bits": bits, "group_size": group, "scales": dtype})
    mx.save_safetensors(str(gold_dir / "dequant.safetensors"), tensors)
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--goldens", default="tests/goldens/mlx")
    args = ap.parse_args()
    torch.manual_seed(0)
    out_dir, gold_dir = pathlib.Path(args.out), pathlib.Path(args.goldens)
    gold_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"mlx_version": mx.__version__, "prompts": PROMPTS, "targets": {},
                "dequant": {"rows": DEQUANT_ROWS, "cols": DEQUANT_COLS, "cases": []}}
    for i, (name, spec) in enumerate(FIXTURES.items()):
        manifest["targets"][name] = make_fixture(name, spec, out_dir, gold_dir, seed=100 + i)
        print(f"{name}: saved", flush=True)
    manifest["dequant"]["cases"] = dequant_goldens(gold_dir, np.random.default_rng(5))
    with open(gold_dir / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
