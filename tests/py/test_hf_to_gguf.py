"""tools/hf_to_gguf.py: a transformers-saved Qwen3 converted by the gguf package runs in dflash
exactly as the safetensors original does (transformers' greedy continuation, tests/goldens)."""
import json
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DFLASH = os.environ.get("DFLASH_BIN", str(ROOT / "build/bin/dflash"))


def golden_i32(name):
    raw = (ROOT / "tests/goldens/qwen3-tiny.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    info = json.loads(raw[8:8 + n])[name]
    a, b = info["data_offsets"]
    return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.int32).tolist()


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
def test_converted_tiny_qwen3_generates_like_the_original(tmp_path, outtype):
    out = tmp_path / f"qwen3-tiny-{outtype}.gguf"
    subprocess.run([sys.executable, str(ROOT / "tools/hf_to_gguf.py"), str(ROOT / "tests/fixtures/qwen3-tiny"),
                    str(out), "--outtype", outtype], check=True, capture_output=True)
    prompt, greedy = golden_i32("prompt1.ids"), golden_i32("greedy")

    def run(model, *flags):
        # An f32 cache: the exact path transformers' f32 goldens are checked against.
        res = subprocess.run([DFLASH, "generate", "-m", str(model), "--mode", "ar", "--no-eos", "--json",
                              "-n", str(len(greedy)), "--prompt-ids", ",".join(map(str, prompt)),
                              "--kv-type", "f32", *flags],
                             check=True, capture_output=True, text=True)
        return json.loads(res.stdout.strip().splitlines()[-1])["tokens"]

    if outtype == "f32":  # the same f32 weights: transformers' own greedy tokens
        assert run(out) == greedy
    else:  # gguf's Q8_0 blocks are bit-for-bit what our load-time Q8_0 makes of the original
        assert run(out) == run(ROOT / "tests/fixtures/qwen3-tiny", "--target-quant", "q8_0")
