#!/usr/bin/env python3
"""A tiny Qwen3 GGUF (v3) written by the gguf package's GGUFWriter, with every weight format we
read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), plus the facts a reader must recover from it:
the metadata, and per tensor its shape, type, and gguf's own dequantisation (the first values
exactly, and the f64 sum of all of them).

Q8_0/Q4_0 tensors are gguf-quantised random floats; gguf cannot quantise Q4_K/Q6_K, so those
are random valid blocks (finite f16 scales).

Usage: .venv/bin/python tools/make_gguf_fixture.py [--out tests/goldens/gguf]
"""
import argparse
import json
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 32, 256, 32, 2, 2, 1, 64
CONTEXT, EPS, THETA = 1024, 1e-6, 1000000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/goldens/gguf")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    path = out / "qwen3-tiny.gguf"
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    w.add_eos_token_id(VOCAB - 1)
    w.add_string("general.name", "qwen3-tiny test fixture")

    expect = {}

    def add(name, rows, cols, qtype):
        if qtype in (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0):
            values = (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)
            if rows == 1:  # norms are 1-D, as llama.cpp writes them
                values = values.reshape(cols)
            if qtype == T.F32:
                data = values
            elif qtype == T.F16:
                data = values.astype(np.float16)
            else:
                data = quantize(values, qtype)
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            data = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
            d_off = [0, 2] if qtype == T.Q4_K else [208]
            for off in d_off:
                d = (rng.standard_normal((rows, cols // block)) * 0.01).astype(np.float16)
                data[:, :, off:off + 2] = d.view(np.uint8).reshape(rows, cols // block, 2)
            data = data.reshape(rows, -1)
        if qtype in (T.F32, T.F16):
            w.add_tensor(name, data)
            deq = data.astype(np.float32)
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
            deq = dequantize(data, qtype).astype(np.float32)
        deq = deq.reshape(rows, cols) if rows > 1 else deq.reshape(cols)
        expect[name] = {"shape": [rows, cols] if rows > 1 else [cols], "type": qtype.name,
                        "first": [float(v) for v in deq.reshape(-1)[:8]],
                        "sum": float(deq.astype(np.float64).sum())}

    add("token_embd.weight", VOCAB, HIDDEN, T.Q8_0)
    add("output_norm.weight", 1, HIDDEN, T.F32)
    add("output.weight", VOCAB, HIDDEN, T.Q6_K)
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for l in range(LAYERS):
        p = f"blk.{l}."
        add(p + "attn_norm.weight", 1, HIDDEN, T.F32)
        add(p + "attn_q.weight", q_dim, HIDDEN, T.Q4_K)
        add(p + "attn_k.weight", kv_dim, HIDDEN, T.Q6_K)
        add(p + "attn_v.weight", kv_dim, HIDDEN, T.Q4_0)
        add(p + "attn_output.weight", HIDDEN, q_dim, T.Q8_0)
        add(p + "attn_q_norm.weight", 1, HEAD_DIM, T.F32)
        add(p + "attn_k_norm.weight", 1, HEAD_DIM, T.F32)
        add(p + "ffn_norm.weight", 1, HIDDEN, T.F32)
        add(p + "ffn_gate.weight", FFN, HIDDEN, T.BF16)
        add(p + "ffn_up.weight", FFN, HIDDEN, T.F16)
        add(p + "ffn_down.weight", HIDDEN, FFN, T.Q8_0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    config = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
              "num_layers": LAYERS, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
              "head_dim": HEAD_DIM, "max_position_embeddings": CONTEXT, "rms_norm_eps": EPS,
              "rope_theta": THETA, "eos_token_id": VOCAB - 1}
    (out / "qwen3-tiny.json").write_text(json.dumps({"config": config, "tensors": expect}, indent=1) + "\n")


if __name__ == "__main__":
    main()
