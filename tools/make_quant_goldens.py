#!/usr/bin/env python3
"""Golden files for the GGUF block formats, written by the gguf package (llama.cpp's own Python
reference), never by our code.

For Q8_0 and Q4_0 (which gguf can quantise) the goldens hold random f32 rows, gguf's quantised
blocks of them and gguf's dequantisation of those blocks; our load-time quantiser and
DequantizeRow must reproduce both bit for bit. gguf cannot quantise Q4_K or Q6_K, so those
goldens are random valid blocks (finite f16 scales, every other byte random) and gguf's
dequantisation of them.

Usage: .venv/bin/python tools/make_quant_goldens.py [--out tests/goldens/quant]
"""
import argparse
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

ROWS, COLS = 6, 512


def source_rows(rng):
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[1] *= 1e-3                      # small magnitudes
    x[2, 7] = 40.0                    # an outlier dominating its block
    x[3, 32:64] = 0.0                 # an all-zero block (scale 0)
    x[4, 64:96] = -x[4, 64:96] ** 2   # one-signed block: Q4_0 picks the negative max
    return x


def random_blocks(rng, qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(ROWS, COLS // block, size), dtype=np.uint8)
    def put_f16(offset, scale):
        v = (rng.standard_normal((ROWS, COLS // block)) * scale).astype(np.float16)
        raw[:, :, offset:offset + 2] = v.view(np.uint8).reshape(ROWS, COLS // block, 2)
    if qtype == T.Q4_K:
        put_f16(0, 0.05)   # d
        put_f16(2, 0.05)   # dmin
    elif qtype == T.Q6_K:
        put_f16(208, 0.01)  # d
    return raw.reshape(ROWS, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/goldens/quant")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240607)
    manifest = {"rows": ROWS, "cols": COLS, "types": {}}
    for name, qtype in [("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_k", T.Q4_K), ("q6_k", T.Q6_K)]:
        entry = {}
        if qtype in (T.Q8_0, T.Q4_0):
            src = source_rows(rng)
            blocks = quantize(src, qtype)
            (out / f"{name}.src.f32").write_bytes(src.tobytes())
            entry["source"] = f"{name}.src.f32"
        else:
            blocks = random_blocks(rng, qtype)
        deq = dequantize(blocks, qtype).astype(np.float32)
        assert np.all(np.isfinite(deq)), name
        (out / f"{name}.blocks").write_bytes(np.ascontiguousarray(blocks).tobytes())
        (out / f"{name}.deq.f32").write_bytes(deq.tobytes())
        entry.update(blocks=f"{name}.blocks", dequant=f"{name}.deq.f32")
        manifest["types"][name] = entry
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
