#!/usr/bin/env python3
"""A Qwen3 Hugging Face directory (safetensors, f32/bf16/f16) as a GGUF in llama.cpp's names and
metadata, written with the gguf package, so llama.cpp and dflash run the same file.

The tokenizer (tokenizer.json + tokenizer_config.json from --tokenizer, default the model
directory) is laid out as llama.cpp's converter does (tools/make_gguf_dflash_fixtures.py:
vocab_like_llama_cpp), padded with unused ids to the model's vocab_size; tokenizer.ggml.pre is
"qwen2". --outtype q8_0 quantises every matrix with gguf.quants (norms stay f32); K-quants are
made from a bf16/f16 GGUF by llama.cpp itself (tools/compare_llamacpp.py --make).

Usage: .venv/bin/python tools/hf_to_gguf.py MODEL_DIR OUT.gguf [--outtype bf16|f16|f32|q8_0]
       [--tokenizer DIR]   (without any tokenizer.json the file gets none)
"""
import argparse
import json
import pathlib
import struct
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize
from tokenizers import Tokenizer

from make_gguf_dflash_fixtures import LAYER_PARTS, add_decoder_metadata, vocab_like_llama_cpp

NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def safetensors_files(model_dir):
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        return sorted({model_dir / f for f in json.loads(index.read_text())["weight_map"].values()})
    return [model_dir / "model.safetensors"]


def tensors(model_dir):
    """(name, dtype, array) per tensor, memory-mapped; bf16 arrives as raw uint16."""
    for path in safetensors_files(model_dir):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            yield name, info["dtype"], data[a:b].view(NUMPY[info["dtype"]]).reshape(info["shape"])


def as_f32(dtype, a):
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    parts = dict(LAYER_PARTS, post_attention_layernorm="ffn_norm")
    return f"blk.{layer}.{parts[module]}.{kind}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--outtype", default="bf16", choices=["bf16", "f16", "f32", "q8_0"])
    ap.add_argument("--tokenizer", type=pathlib.Path)
    args = ap.parse_args()
    cfg = json.loads((args.model / "config.json").read_text())
    if cfg["architectures"] != ["Qwen3ForCausalLM"]:
        raise SystemExit(f"{args.model}: only Qwen3ForCausalLM is converted, not {cfg['architectures']}")
    cfg.setdefault("rope_parameters", {"rope_theta": cfg.get("rope_theta", 10000.0)})
    cfg.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])

    w = gguf.GGUFWriter(str(args.out), "qwen3")
    w.add_name(args.model.name)
    add_decoder_metadata(w, "qwen3", cfg)
    tok_dir = args.tokenizer or args.model
    if (tok_dir / "tokenizer.json").exists():
        tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
        tokens, types = vocab_like_llama_cpp(tok, cfg["vocab_size"])
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        gguf.SpecialVocab(tok_dir, load_merges=True, n_vocab=len(tokens)).add_to_gguf(w)
    else:  # dflash runs it with --prompt-ids; llama.cpp needs a tokenizer to load a file
        print(f"note: no {tok_dir / 'tokenizer.json'}: writing the GGUF without a tokenizer", file=sys.stderr)
        if cfg.get("eos_token_id") is not None:
            w.add_eos_token_id(cfg["eos_token_id"])

    for name, dtype, a in tensors(args.model):
        target = gguf_name(name)
        if a.ndim == 1 or args.outtype == "f32":
            w.add_tensor(target, as_f32(dtype, a))
        elif args.outtype == "q8_0":
            w.add_tensor(target, quantize(as_f32(dtype, a), T.Q8_0), raw_dtype=T.Q8_0)
        elif args.outtype == "bf16" and dtype == "BF16":
            w.add_tensor(target, np.ascontiguousarray(a).view(np.uint8), raw_dtype=T.BF16)
        elif args.outtype == "bf16":
            w.add_tensor(target, quantize(as_f32(dtype, a), T.BF16), raw_dtype=T.BF16)
        else:
            w.add_tensor(target, as_f32(dtype, a).astype(np.float16))
        print(f"{target:32s} {list(a.shape)} {args.outtype if a.ndim == 2 else 'f32'}", flush=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


if __name__ == "__main__":
    main()
