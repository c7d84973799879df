"""Sharded bf16 safetensors written tensor by tensor, each tensor in row chunks.

A shard's header (JSON with every tensor's dtype, shape and byte range) is known before any
data, so it is written first and the values stream after it: peak memory is one chunk
(CHUNK_BYTES), not one tensor or one model. Shards are filled in order up to `max_shard_bytes`
(a tensor larger than that gets a shard of its own) and named as transformers names them, with
model.safetensors.index.json beside them; a model that fits one shard is model.safetensors.
"""
import json
import os
import sys
import time
import zlib

import numpy as np

CHUNK_BYTES = 16 << 20


TABLE = 1 << 16


def _bf16_bits(x):
    """float32 -> bf16 bit patterns, rounding to nearest even (as torch's .to(bfloat16))."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _samples(fill, n, rng, std):
    """n float32 draws from a fill's distribution (layout.py lists the fills)."""
    if fill == "matrix":
        return rng.standard_normal(n, dtype=np.float32) * np.float32(std)
    if fill == "norm":
        return 1 + rng.standard_normal(n, dtype=np.float32) * np.float32(0.02)
    if fill == "norm_1p":
        return rng.standard_normal(n, dtype=np.float32) * np.float32(0.02)
    if fill == "a_log":
        return np.log(rng.uniform(1, 16, n))
    if fill == "dt_bias":
        return 1 + rng.standard_normal(n, dtype=np.float32) * np.float32(0.1)
    raise ValueError(f"unknown fill {fill!r}")


def _write_tensor(f, spec, seed, std):
    """Each value is drawn from a table of 2^16 bf16 draws of the tensor's distribution by a
    random 16-bit index: an exact sample of that distribution's 2^16-point empirical version,
    at the cost of one gather per value (a normal draw plus rounding per value was ~10x
    slower, and gigabytes of weights are written). Each tensor's stream depends on its name and
    the seed only, so --layers or sharding never changes the values of the tensors kept."""
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    table = _bf16_bits(_samples(spec.fill, TABLE, rng, std))
    left = int(np.prod(spec.shape, dtype=np.int64))
    while left:
        n = min(left, CHUNK_BYTES // 2)
        f.write(table[rng.integers(0, TABLE, n, dtype=np.uint16)].tobytes())
        left -= n


def nbytes(spec):
    return 2 * int(np.prod(spec.shape, dtype=np.int64))


def _shards(specs, max_shard_bytes):
    shards, current, size = [], [], 0
    for s in specs:
        if current and size + nbytes(s) > max_shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(s)
        size += nbytes(s)
    if current:
        shards.append(current)
    return shards


def _header(specs):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for s in specs:
        header[s.name] = {"dtype": "BF16", "shape": list(s.shape), "data_offsets": [offset, offset + nbytes(s)]}
        offset += nbytes(s)
    raw = json.dumps(header, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8)  # data starts 8-byte aligned, as safetensors writes it


def write_checkpoint(out_dir, specs, seed, std=0.02, max_shard_bytes=2 << 30, label="model"):
    """Writes `specs` into out_dir; progress on stderr. Returns the file names written."""
    os.makedirs(out_dir, exist_ok=True)
    shards = _shards(specs, max_shard_bytes)
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    total = sum(nbytes(s) for s in specs)
    done, t0 = 0, time.time()
    weight_map = {}
    for name, shard in zip(names, shards):
        with open(os.path.join(out_dir, name), "wb") as f:
            header = _header(shard)
            f.write(len(header).to_bytes(8, "little"))
            f.write(header)
            for s in shard:
                _write_tensor(f, s, seed, std)
                weight_map[s.name] = name
                done += nbytes(s)
                print(f"\r{label}: {done / 2**30:6.2f} / {total / 2**30:.2f} GiB  "
                      f"{done / 2**20 / max(time.time() - t0, 1e-9):5.0f} MiB/s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if len(shards) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    return names
