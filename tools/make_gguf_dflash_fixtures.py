#!/usr/bin/env python3
"""GGUF files in llama.cpp's naming for what tests/goldens/gguf/qwen3-tiny.gguf does not cover,
written by the gguf package's GGUFWriter / SpecialVocab, never by our code:

  dflash-tiny.dflash.gguf        tests/fixtures/dflash-tiny (z-lab's saved draft) as
                                 architecture "dflash" (upstream llama.cpp): dflash_fc,
                                 dflash_hidden_norm, output_norm, blk.N.* with
                                 post_attention_norm, dflash.* metadata; F32, so z-lab's
                                 goldens for the safetensors draft still apply
  dflash-tiny.dflash-draft.gguf  the same draft as "dflash-draft" (the earlier forks): ffn_norm,
                                 token_embd/output copies, Q8_0 matrices (gguf-quantised)
  tiny-tokenizer.gguf            a one-layer Qwen3 whose tokenizer.ggml.* is the tiny Qwen
                                 tokenizer (tests/data/tokenizers/tiny-qwen35 with Qwen2's
                                 pre-tokenizer regex) plus unused padding ids, as llama.cpp's
                                 converter lays a Hugging Face vocabulary out
  tiny-tokenizer.json            the `tokenizers` library's ids and decodes for the text corpus
                                 (tests/data/text_corpus), with that same tokenizer.json

Usage: .venv/bin/python tools/make_gguf_dflash_fixtures.py [--out tests/goldens/gguf]
"""
import argparse
import json
import pathlib
import struct
import tempfile

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PADDED_VOCAB = 912  # the tiny tokenizer has 906 ids; the rest are llama.cpp's [PADn] entries


def read_safetensors(path):
    """f32 tensors of a safetensors file (all our tiny fixtures are f32)."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(info["shape"])
    return out


LAYER_PARTS = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
               "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def add_decoder_metadata(w, arch, cfg):
    p = arch + "."
    w.add_uint32(p + "context_length", cfg["max_position_embeddings"])
    w.add_uint32(p + "embedding_length", cfg["hidden_size"])
    w.add_uint32(p + "feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(p + "block_count", cfg["num_hidden_layers"])
    w.add_uint32(p + "attention.head_count", cfg["num_attention_heads"])
    w.add_uint32(p + "attention.head_count_kv", cfg["num_key_value_heads"])
    w.add_uint32(p + "attention.key_length", cfg["head_dim"])
    w.add_uint32(p + "attention.value_length", cfg["head_dim"])
    w.add_float32(p + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    w.add_float32(p + "rope.freq_base", cfg["rope_parameters"]["rope_theta"])


def write_draft(out, arch, post_norm, quantized, with_target_copies, target):
    src = ROOT / "tests/fixtures/dflash-tiny"
    cfg = json.loads((src / "config.json").read_text())
    tensors = read_safetensors(src / "model.safetensors")
    w = gguf.GGUFWriter(str(out / f"dflash-tiny.{arch}.gguf"), arch)
    add_decoder_metadata(w, arch, cfg)
    d = cfg["dflash_config"]
    w.add_uint32(f"{arch}.dflash.block_size", d["block_size"])
    w.add_uint32(f"{arch}.dflash.mask_token_id", d["mask_token_id"])
    w.add_array(f"{arch}.dflash.target_layer_ids", d["target_layer_ids"])
    w.add_uint32(f"{arch}.dflash.n_target_features", len(d["target_layer_ids"]) * cfg["hidden_size"])

    def add(name, a):
        if quantized and a.ndim == 2:
            w.add_tensor(name, quantize(a, T.Q8_0), raw_dtype=T.Q8_0)
        else:
            w.add_tensor(name, a)

    add("dflash_fc.weight", tensors["fc.weight"])
    add("dflash_hidden_norm.weight", tensors["hidden_norm.weight"])
    add("output_norm.weight", tensors["norm.weight"])
    parts = dict(LAYER_PARTS, post_attention_layernorm=post_norm)
    for name, a in tensors.items():
        if not name.startswith("layers."):
            continue
        _, layer, rest = name.split(".", 2)
        module, kind = rest.rsplit(".", 1)
        add(f"blk.{layer}.{parts[module]}.{kind}", a)
    if with_target_copies:  # the forks' converters copy the target's embedding and head in
        add("token_embd.weight", target["model.embed_tokens.weight"])
        add("output.weight", target["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_tokenizer_dir(tmp):
    """tiny-qwen35's vocabulary with Qwen2's pre-tokenizer: what tokenizer.ggml.pre "qwen2" names."""
    src = ROOT / "tests/data/tokenizers/tiny-qwen35"
    tj = json.loads((src / "tokenizer.json").read_text())
    tj["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": QWEN2_REGEX}
    tj["pre_tokenizer"]["pretokenizers"][1]["trim_offsets"] = False
    (tmp / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    (tmp / "tokenizer_config.json").write_text((src / "tokenizer_config.json").read_text())
    return tmp


def vocab_like_llama_cpp(tok, n_vocab):
    """tokens and token types in the layout of llama.cpp's convert_hf_to_gguf for a BPE vocab."""
    reverse = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    added = {a.content: a for a in tok.get_added_tokens_decoder().values()}
    tokens, types = [], []
    for i in range(n_vocab):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif reverse[i] in added:
            tokens.append(reverse[i])
            looks_special = reverse[i].startswith("<|") and reverse[i].endswith("|>")
            types.append(gguf.TokenType.CONTROL if added[reverse[i]].special or looks_special
                         else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def write_tokenizer_model(out, rng):
    with tempfile.TemporaryDirectory() as tmp:
        tdir = reference_tokenizer_dir(pathlib.Path(tmp))
        tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))
        tokens, types = vocab_like_llama_cpp(tok, PADDED_VOCAB)
        w = gguf.GGUFWriter(str(out / "tiny-tokenizer.gguf"), "qwen3")
        cfg = dict(max_position_embeddings=256, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=32, rms_norm_eps=1e-6,
                   rope_parameters={"rope_theta": 10000.0})
        add_decoder_metadata(w, "qwen3", cfg)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        gguf.SpecialVocab(tdir, load_merges=True, n_vocab=len(tokens)).add_to_gguf(w)

        def add(name, *shape):
            w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float16))

        add("token_embd.weight", PADDED_VOCAB, 64)  # tied: no output.weight
        w.add_tensor("output_norm.weight", np.ones(64, np.float32))
        for name, shape in [("attn_q", (64, 64)), ("attn_k", (32, 64)), ("attn_v", (32, 64)),
                            ("attn_output", (64, 64)), ("ffn_gate", (64, 64)), ("ffn_up", (64, 64)),
                            ("ffn_down", (64, 64))]:
            add(f"blk.0.{name}.weight", *shape)
        for name, n in [("attn_norm", 64), ("ffn_norm", 64), ("attn_q_norm", 32), ("attn_k_norm", 32)]:
            w.add_tensor(f"blk.0.{name}.weight", np.ones(n, np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

        cases = []
        for f in sorted((ROOT / "tests/data/text_corpus").glob("*.txt")):
            text = f.read_bytes().decode("utf-8")  # as is: read_text would turn \r\n into \n
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"file": f.name, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        specials = {k: tok.token_to_id(v) for k, v in (("eos", "<|im_end|>"), ("pad", "<|endoftext|>"))}
        (out / "tiny-tokenizer.json").write_text(json.dumps(
            {"vocab_size": PADDED_VOCAB, "special_ids": specials, "cases": cases}, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/goldens/gguf")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    target = read_safetensors(ROOT / "tests/fixtures/qwen3-tiny/model.safetensors")
    write_draft(out, "dflash", "post_attention_norm", quantized=False, with_target_copies=False, target=target)
    write_draft(out, "dflash-draft", "ffn_norm", quantized=True, with_target_copies=True, target=target)
    write_tokenizer_model(out, np.random.default_rng(11))


if __name__ == "__main__":
    main()
