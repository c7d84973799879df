#!/usr/bin/env python3
"""Writes fuzz/corpus/<target>/ (seeds cut down from the test fixtures and goldens) and
fuzz/repro/<target>/ (the known crashes of issue 36) for the fuzz targets in fuzz/.

Seeds are small on purpose (the whole corpus stays a few hundred KB): safetensors and GGUF
files keep their headers and metadata but only their small tensors. Standard library only.
Run from anywhere: python3 fuzz/make_corpus.py
"""
import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
SEP = b"\n--dflash-fuzz-next-file--\n"  # fuzz_support.h's kFileSeparator
SMALL = 1024  # bytes: the tensors a seed keeps


def write(kind, target, name, data):
    path = FUZZ / kind / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def read_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    tensors = {k: (v, body[v["data_offsets"][0]:v["data_offsets"][1]])
               for k, v in header.items() if k != "__metadata__"}
    return header.get("__metadata__"), tensors


def safetensors(tensors, metadata=None):
    """tensors: name -> (header entry, bytes); offsets are recomputed."""
    header, body = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (info, data) in tensors.items():
        header[name] = {"dtype": info["dtype"], "shape": info["shape"],
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def small_tensors(path, keep=lambda name, size: size <= SMALL):
    metadata, tensors = read_safetensors(path)
    return metadata, {k: v for k, v in tensors.items() if keep(k, len(v[1]))}


# GGUF: value types whose size is fixed, by type id (8 string and 9 array are read apart).
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_small(path):
    """The GGUF with every metadata key but only tensors of at most SMALL bytes."""
    raw = pathlib.Path(path).read_bytes()
    pos = 24
    version, n_tensors, n_kv = struct.unpack("<IQQ", raw[4:24])

    def skip_value(t):
        nonlocal pos
        if t == 8:
            pos += 8 + struct.unpack("<Q", raw[pos:pos + 8])[0]
        elif t == 9:
            et, n = struct.unpack("<IQ", raw[pos:pos + 12])
            pos += 12
            for _ in range(n):
                skip_value(et)
        else:
            pos += struct.calcsize("<" + GGUF_SCALARS[t])

    alignment = 32
    for _ in range(n_kv):
        klen = struct.unpack("<Q", raw[pos:pos + 8])[0]
        key = raw[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        t = struct.unpack("<I", raw[pos:pos + 4])[0]
        pos += 4
        if key == "general.alignment":
            alignment = struct.unpack("<I", raw[pos:pos + 4])[0]
        skip_value(t)
    kv_bytes = raw[24:pos]
    infos = []
    for _ in range(n_tensors):
        start = pos
        nlen = struct.unpack("<Q", raw[pos:pos + 8])[0]
        pos += 8 + nlen
        n_dims = struct.unpack("<I", raw[pos:pos + 4])[0]
        pos += 4 + 8 * n_dims + 4
        offset = struct.unpack("<Q", raw[pos:pos + 8])[0]
        infos.append((raw[start:pos], offset))
        pos += 8
    data_start = (pos + alignment - 1) // alignment * alignment
    data_end = len(raw) - data_start
    ends = sorted({o for _, o in infos} | {data_end})
    kept, body = [], b""
    for info, offset in infos:
        size = ends[ends.index(offset) + 1] - offset  # up to the next tensor: includes padding
        if size <= SMALL:
            kept.append(info + struct.pack("<Q", len(body)))
            body += raw[data_start + offset:data_start + offset + size]
    head = b"GGUF" + struct.pack("<IQQ", version, len(kept), n_kv) + kv_bytes + b"".join(kept)
    head += b"\0" * (-len(head) % alignment)
    return head + body


def nested(depth, leaf="1"):
    return "[" * depth + leaf + "]" * depth


def seeds():
    fixtures, goldens = ROOT / "tests/fixtures", ROOT / "tests/goldens"
    # safetensors: norms and small matrices of an f32 draft, a bf16 target, MLX words.
    for name in ["dflash-tiny", "qwen3-tied-bf16", "qwen3-mlx8-g32"]:
        meta, tensors = small_tensors(fixtures / name / "model.safetensors")
        write("corpus", "safetensors", name + ".safetensors", safetensors(tensors, meta))
    # A sharded directory: the index and two shards.
    _, tensors = small_tensors(fixtures / "dflash-tiny/model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    index = {"metadata": {}, "weight_map": {n: s for s, ns in shards.items() for n in ns}}
    parts = [json.dumps(index, indent=1).encode()] + [
        safetensors({n: tensors[n] for n in ns}) for ns in shards.values()]
    write("corpus", "safetensors_dir", "dflash-tiny-sharded", SEP.join(parts))
    # MLX: the config with its quantization and one quantised matrix (or two, mixed widths).
    for name, matrices in [("qwen3-mlx4-g64", ["model.layers.0.mlp.gate_proj"]),
                           ("qwen3-mlx8-g32", ["model.layers.0.self_attn.k_proj"]),
                           ("qwen3-mlx4-g128-mixed", ["model.layers.0.mlp.down_proj",
                                                      "model.layers.0.self_attn.q_proj"])]:
        meta, tensors = read_safetensors(fixtures / name / "model.safetensors")
        keep = {k: v for k, v in tensors.items() if k.rsplit(".", 1)[0] in matrices}
        config = (fixtures / name / "config.json").read_bytes()
        write("corpus", "mlx", name, config + SEP + safetensors(keep, meta))
    for name in ["qwen3-tiny.gguf", "dflash-tiny.dflash.gguf", "dflash-tiny.dflash-draft.gguf"]:
        write("corpus", "gguf", name, gguf_small(goldens / "gguf" / name))
    for name in ["qwen3-tiny", "qwen3-yarn", "qwen3-yarn-legacy", "qwen3-tied-bf16", "dflash-tiny",
                 "dflash-sliding", "dflash-tied"]:
        write("corpus", "config", name + ".json", (fixtures / name / "config.json").read_bytes())
    for d in ["tiny-gpt2", "tiny-qwen35", "tiny-splits"]:
        src = ROOT / "tests/data/tokenizers" / d
        write("corpus", "tokenizer", d, (src / "tokenizer.json").read_bytes() + SEP +
              (src / "tokenizer_config.json").read_bytes())
    for path in sorted((goldens / "templates").glob("*.json")):
        golden = json.loads(path.read_text())
        if "template" in golden:
            write("corpus", "jinja", path.stem + ".jinja", golden["template"])
    cases = json.loads((goldens / "templates/cases.json").read_text())["cases"]
    for name, case in cases.items():
        write("corpus", "template_values", name + ".json", json.dumps(case["messages"]))
        body = {"messages": case["messages"], "max_tokens": 16, "temperature": 0}
        if "tools" in case:
            body.update(tools=case["tools"], tool_choice="auto")
        write("corpus", "request", "chat-" + name + ".json", json.dumps(body))
    write("corpus", "request", "completion-text.json",
          json.dumps({"prompt": "def f(x):", "max_tokens": 8, "stop": ["\n\n"], "stream": True,
                      "stream_options": {"include_usage": True}, "seed": 3, "top_k": 4}))
    write("corpus", "request", "completion-ids.json", json.dumps({"prompt": [1, 2, 3], "max_tokens": 4}))
    write("corpus", "request", "chat-kwargs.json",
          json.dumps({"messages": [{"role": "user", "content": "hi"}],
                      "chat_template_kwargs": {"enable_thinking": False}}))
    # Anthropic's messages (POST /v1/messages) and OpenAI's responses (POST /v1/responses).
    write("corpus", "request", "anthropic-text.json",
          json.dumps({"model": "m", "max_tokens": 16, "system": "be brief",
                      "messages": [{"role": "user", "content": "hi"}]}))
    write("corpus", "request", "anthropic-tool_roundtrip.json", json.dumps({
        "model": "m", "max_tokens": 32, "stop_sequences": ["x"], "thinking": {"type": "enabled", "budget_tokens": 8},
        "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "f"},
        "messages": [
            {"role": "user", "content": "call f"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                              {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                                         {"type": "text", "text": "thanks"}]}]}))
    write("corpus", "request", "responses-text.json",
          json.dumps({"model": "m", "input": "hello", "instructions": "be brief", "max_output_tokens": 8}))
    write("corpus", "request", "responses-tool_roundtrip.json", json.dumps({
        "model": "m", "reasoning": {"effort": "low"},
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": "auto",
        "input": [
            {"role": "developer", "content": "dev"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\": 1}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "one"}]}]}))


def repros():
    user = '{"role": "user", "content": "hi"}'
    # Request JSON 15,000 levels deep, in a message, in the template kwargs and in a tool.
    write("repro", "request", "deep-message.json",
          '{"messages": [{"role": "user", "content": "hi", "extra": %s}]}' % nested(15000))
    write("repro", "request", "deep-kwargs.json",
          '{"messages": [%s], "chat_template_kwargs": {"x": %s}}' % (user, nested(15000)))
    write("repro", "request", "deep-tool-parameters.json",
          '{"messages": [%s], "tools": [{"type": "function", "function": {"name": "f", '
          '"parameters": %s}}]}' % (user, nested(15000, "{}")))
    write("repro", "template_values", "deep-100k.json", nested(100000))
    # Templates without limits.
    for name, source in [("repeat-empty-string", "{{ '' * 10**18 }}"),
                         ("repeat-empty-list", "{{ ([] * 10**18) | length }}"),
                         ("repeat-overflow", "{{ 'abcd' * 4611686018427387904 }}"),
                         ("center-huge", "{{ ' ' | center(10**12) }}"),
                         ("ljust-huge", "{{ ' ' | ljust(10**12) }}"),
                         ("nested-range", "{% for a in range(100000) %}{% for b in range(100000) %}"
                                          "{{ a }}{% endfor %}{% endfor %}")]:
        write("repro", "jinja", name + ".jinja", source)
    # A tensor whose shape product overflows int64 (numel wraps, the size check passes).
    overflow = {"w": ({"dtype": "F32", "shape": [4294967296, 4294967296, 16]}, b"")}
    write("repro", "safetensors", "shape-overflow.safetensors", safetensors(overflow))
    mlx_config = (ROOT / "tests/fixtures/qwen3-mlx4-g64/config.json").read_bytes()
    words = {"m.weight": ({"dtype": "U32", "shape": [2**31, 2**33]}, b""),
             "m.scales": ({"dtype": "BF16", "shape": [2**31, 2**30]}, b""),
             "m.biases": ({"dtype": "BF16", "shape": [2**31, 2**30]}, b"")}
    write("repro", "mlx", "shape-overflow", mlx_config + SEP + safetensors(words))
    # Draft and target configs whose sizes exhaust memory or wrap.
    draft = json.loads((ROOT / "tests/fixtures/dflash-tiny/config.json").read_text())
    target = json.loads((ROOT / "tests/fixtures/qwen3-tiny/config.json").read_text())
    for name, base, change in [("draft-block-size", draft, {"dflash_config": dict(draft["dflash_config"], block_size=1000000)}),
                               ("draft-layers", draft, {"num_hidden_layers": 10**9}),
                               ("draft-head-dim", draft, {"head_dim": 10**9}),
                               ("draft-hidden-size-wraps", draft, {"hidden_size": 2**32 + 64}),
                               ("target-layers", target, {"num_hidden_layers": 10**9}),
                               ("target-head-dim", target, {"head_dim": 10**9})]:
        write("repro", "config", name + ".json", json.dumps(dict(base, **change), indent=1))
    write("repro", "config", "nested-100k.json", '{"hidden_size": %s}' % nested(100000))
    tok = json.loads((ROOT / "tests/data/tokenizers/tiny-gpt2/tokenizer.json").read_text())
    text = json.dumps(tok).replace('"decoder": ', '"decoder": %s, "x": ' % nested(100000), 1)
    write("repro", "tokenizer", "deep-decoder", text)


if __name__ == "__main__":
    for kind in ["corpus", "repro"]:
        shutil.rmtree(FUZZ / kind, ignore_errors=True)
    seeds()
    repros()
