#!/usr/bin/env python3
"""The hybrid (Qwen3.5) and MoE (Qwen3-MoE) fixture targets in the formats users hold them, made
by the formats' own converters from the committed transformers fixtures, never by our code:

  tests/fixtures/qwen3moe-all-sparse              a Qwen3-MoE checkpoint of the one shape llama.cpp's
  tests/goldens/formats/qwen3moe-all-sparse.safetensors   qwen3moe takes (every layer sparse,
                                                  top-k renormalised: its graph always does;
                                                  hidden 64, so that mlx-lm's 8-bit router
                                                  override, groups of 64, applies), with
                                                  goldens, made as make_moe_fixtures.py makes
                                                  its targets
  tests/goldens/formats/<fixture>.llamacpp.gguf   llama.cpp's convert_hf_to_gguf.py with its
                                                  bundled gguf-py (--outtype f32, so the
                                                  transformers goldens of <fixture> apply)
  tests/fixtures/<fixture>-mlx4                   mlx-lm's own converter (mlx_lm convert -q
                                                  --q-bits 4 --q-group-size 32) on qwen35-tiny
                                                  and qwen3moe-all-sparse
  tests/goldens/formats/<fixture>-mlx4.safetensors   transformers' goldens (as
                                                  make_hybrid/moe_fixtures.py write them) for
                                                  the model whose weights are the MLX folder's,
                                                  dequantised in f32 by mlx, a hybrid's (1 + w)
                                                  norms minus the 1.0 mlx-lm added
  tests/goldens/formats/tiny-qwen35.vocab.gguf    the converter's --vocab-only output for
                                                  tests/data/tokenizers/tiny-qwen35 (906 ids,
                                                  Qwen3.5's split regex) with Qwen3.5-4B's chat
                                                  template: the tokenizer and template a
                                                  Qwen3.5 GGUF carries (tokenizer.ggml.pre qwen35)

The converter needs a tokenizer beside config.json. The fixtures have a 256-id vocabulary, so a
real Qwen tokenizer (151k / 248k ids) does not fit; this script trains a BPE of 252 ids with
Qwen3.5's split regex on tests/data/text_corpus (printable ASCII alphabet only, ChatML special
tokens, <think> and </think>) and gives it Qwen3.5-4B's chat template. It lacks most of the 256
byte tokens, so dflash.cpp refuses it as a text tokenizer (the model GGUFs are tested on token
ids); the tokenizer a Qwen3.5 GGUF carries is tested on tiny-qwen35.vocab.gguf. llama.cpp names a
BPE pre-tokenizer by hashing the ids it makes of a test string, so no tiny tokenizer has a known
hash; the converter's get_vocab_base_pre is therefore answered with the name it returns for the
real tokenizers of these families ("qwen35" for Qwen/Qwen3.5-9B-Instruct, chkhsh d30d75d9...;
"qwen2" for Qwen3). Everything else is the converter's own code path.

mlx-lm 0.32 reads Qwen3.5 only as the multimodal model_type qwen3_5 (its qwen3_5_text is not
registered), so the converter is given qwen35-tiny's text config nested under text_config, as the
published Qwen3.5 checkpoints are; the tensors are the same.

Run with the reference venv (torch, transformers, tokenizers, mlx, mlx-lm):
  .venv-ref/bin/python tools/make_format_fixtures.py \\
      --llama-cpp /tmp/llama-sdist/llama_cpp_python-0.3.36/vendor/llama.cpp
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "goldens" / "formats"

import mlx.core as mx
import numpy as np
from transformers import Qwen3_5ForCausalLM, Qwen3MoeForCausalLM

import make_hybrid_fixtures
from make_mlx_fixtures import dequantize_f32
from make_moe_fixtures import MIN_MARGIN, SEEDS, make_target, target_goldens

# MLX folder -> (source fixture, bits, group size)
MLX_FIXTURES = {"qwen35-tiny-mlx4": ("qwen35-tiny", 4, 32), "qwen3moe-all-sparse-mlx4": ("qwen3moe-all-sparse", 4, 32)}
# The norms mlx-lm's qwen3_5 sanitize adds 1.0 to.
ONE_PLUS_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                  ".q_norm.weight", ".k_norm.weight")

MOE_SOURCE = ("qwen3moe-all-sparse", dict(dtype=torch.float32, fused=False,
                                          cfg=dict(num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                                   num_hidden_layers=2, hidden_size=64)))

# fixture -> the tokenizer.ggml.pre llama.cpp's converter writes for its family's real tokenizer,
# and converter flags: --no-mtp because the fixtures have no multi-token-prediction layers (the
# Qwen3.5 class insists on some otherwise; the published checkpoints have one).
QWEN35 = ("qwen35", ["--no-mtp"])
QWEN3 = ("qwen2", [])
GGUF_FIXTURES = {"qwen35-tiny": QWEN35, "qwen35-tied-bf16": QWEN35, "qwen3moe-all-sparse": QWEN3}

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = ["english.txt", "code.txt"]


def tiny_tokenizer():
    """A 252-id byte-level BPE with Qwen3.5's pre-tokenizer, trained on the committed corpus."""
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated"), byte_level])
    tok.decoder = decoders.ByteLevel()
    alphabet = [byte_level.pre_tokenize_str(chr(b))[0][0] for b in [9, 10, *range(32, 127)]]
    lines = [line for name in CORPUS
             for line in (ROOT / "tests/data/text_corpus" / name).read_text(encoding="utf-8").splitlines()
             if line.strip()]
    trainer = trainers.BpeTrainer(vocab_size=250, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=alphabet, limit_alphabet=len(alphabet), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.add_tokens(["<think>", "</think>"])
    return tok


def write_tokenizer(tok, folder):
    tok.save(str(folder / "tokenizer.json"))
    template = (ROOT / "tests/data/templates/Qwen3.5-4B.jinja").read_text(encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "add_bos_token": False,
         "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": template}, indent=1))


# Runs llama.cpp's converter with get_vocab_base_pre answered (see the module docstring).
RUNNER = """
import sys
sys.path.insert(0, sys.argv[1])
import conversion.base
pre = sys.argv[2]
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
import convert_hf_to_gguf
convert_hf_to_gguf.main()
"""


def convert_gguf(llama_cpp, fixture, tok, scratch, out):
    pre, flags = GGUF_FIXTURES[fixture]
    folder = scratch / fixture
    shutil.copytree(ROOT / "tests" / "fixtures" / fixture, folder)
    write_tokenizer(tok, folder)
    env = dict(os.environ, PYTHONPATH=str(llama_cpp / "gguf-py"))
    run = subprocess.run([sys.executable, "-c", RUNNER, str(llama_cpp), pre, str(folder), *flags, "--outtype", "f32",
                          "--outfile", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"llama.cpp's converter failed on {fixture}:\n{run.stderr[-3000:]}")
    print(f"wrote {out} ({out.stat().st_size} bytes)")


def published_config(fixture, text):
    """The config.json mlx-lm 0.32 reads: Qwen3.5 nested under text_config (its qwen3_5_text is
    not registered), Qwen3-MoE with num_experts and rope_theta at the top level as the published
    Qwen3-30B-A3B config has them (transformers 5 writes num_local_experts... / rope_parameters)."""
    if fixture.startswith("qwen35"):
        return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": text,
                "tie_word_embeddings": text["tie_word_embeddings"]}
    return dict(text, num_experts=text.get("num_experts") or text["num_local_experts"],
                rope_theta=text["rope_parameters"]["rope_theta"])


def convert_mlx(name, scratch):
    fixture, bits, group = MLX_FIXTURES[name]
    src = scratch / f"{fixture}-for-mlx"
    shutil.copytree(ROOT / "tests" / "fixtures" / fixture, src)
    text = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps(published_config(fixture, text), indent=1))
    out = ROOT / "tests" / "fixtures" / name
    shutil.rmtree(out, ignore_errors=True)
    run = subprocess.run([sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(src), "--mlx-path", str(out),
                          "-q", "--q-bits", str(bits), "--q-group-size", str(group)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"mlx-lm's converter failed on {fixture}:\n{run.stderr[-3000:]}")
    for extra in ["README.md", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"]:
        (out / extra).unlink(missing_ok=True)  # one shard; the fixtures have no tokenizer
    print(f"wrote {out}")
    return out


def dequantised(stored, quantization, one_plus):
    """The folder's tensors in f32 under transformers' names: matrices mx-dequantised, the
    (1 + w) norms of a hybrid minus the 1.0 mlx-lm added, stacked experts (switch_mlp) kept stacked."""
    out = {}
    for key, value in stored.items():
        if key.endswith((".scales", ".biases")):
            continue
        module = key.removesuffix(".weight")
        if module + ".scales" in stored:
            scheme = quantization.get(module, quantization)  # per-module overrides, e.g. 8-bit routers
            w = dequantize_f32(value, stored[module + ".scales"], stored[module + ".biases"], scheme["group_size"],
                               scheme["bits"])
        else:
            w = np.array(value.astype(mx.float32))
            if one_plus and key.endswith(ONE_PLUS_NORMS):
                w = w - 1.0
        out[key.removeprefix("language_model.")] = torch.from_numpy(np.ascontiguousarray(w))
    return out


@torch.no_grad()
def mlx_goldens(name, folder, goldens):
    """transformers on the MLX folder's weights (dequantised in f32, see dequantised())."""
    fixture = MLX_FIXTURES[name][0]
    hybrid = fixture.startswith("qwen35")
    quantization = json.loads((folder / "config.json").read_text())["quantization"]
    weights = dequantised(mx.load(str(folder / "model.safetensors")), quantization, one_plus=hybrid)
    cls = Qwen3_5ForCausalLM if hybrid else Qwen3MoeForCausalLM
    model = cls.from_pretrained(ROOT / "tests" / "fixtures" / fixture, dtype=torch.float32).eval()
    params = dict(model.named_parameters())
    for key, w in weights.items():
        if ".switch_mlp." in key:  # transformers 5 keeps experts fused: gate_up_proj [E, 2I, H]
            mlp = key[:key.index(".switch_mlp.")]
            if key.endswith("down_proj.weight"):
                params[mlp + ".experts.down_proj"].copy_(w)
            else:
                I = w.shape[1]
                half = slice(0, I) if ".gate_proj." in key else slice(I, 2 * I)
                params[mlp + ".experts.gate_up_proj"][:, half].copy_(w)
        else:
            params[key].copy_(w.reshape(params[key].shape))
    if hybrid:
        g = make_hybrid_fixtures.target_goldens(model)
    else:
        # The quantised router's choices sit closer than the source's (its seed was picked for
        # MIN_MARGIN at full precision); ours differ from transformers' router logits by
        # summation order, ~1e-6, so a tenth of MIN_MARGIN still leaves a 10x margin.
        g, margin = target_goldens(model)
        if margin < MIN_MARGIN / 10:
            sys.exit(f"{name}: router margin {margin:.2e} below {MIN_MARGIN / 10}: routing would be decided by rounding")
        print(f"{name}: router margin {margin:.2e}")
    save_file(g, str(goldens / f"{name}.safetensors"))
    print(f"wrote goldens for {name}")


def make_moe_source(out):
    """The MoE source checkpoint and its transformers goldens (seeds as make_moe_fixtures.py)."""
    name, spec = MOE_SOURCE
    torch.manual_seed(0)
    for seed in range(SEEDS):
        model = make_target(name, spec, str(ROOT / "tests" / "fixtures"), torch.Generator().manual_seed(1000 * len(name) + seed))
        goldens, margin = target_goldens(model)
        if margin >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"{name}: no seed of {SEEDS} gave router margins above {MIN_MARGIN}")
    save_file(goldens, str(out / f"{name}.safetensors"))
    print(f"target {name}: seed {seed}, router margin {margin:.2e}")


def convert_vocab(llama_cpp, scratch, out):
    """tiny-qwen35's tokenizer as the vocabulary of a Qwen3.5 GGUF (--vocab-only)."""
    folder = scratch / "tiny-qwen35-vocab"
    folder.mkdir()
    src = ROOT / "tests/data/tokenizers/tiny-qwen35"
    shutil.copy(src / "tokenizer.json", folder / "tokenizer.json")
    tok_config = json.loads((src / "tokenizer_config.json").read_text())
    tok_config["chat_template"] = (ROOT / "tests/data/templates/Qwen3.5-4B.jinja").read_text(encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1))
    config = json.loads((ROOT / "tests/fixtures/qwen35-tiny/config.json").read_text())
    config["vocab_size"] = len(Tokenizer.from_file(str(src / "tokenizer.json")).get_vocab(with_added_tokens=True))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    env = dict(os.environ, PYTHONPATH=str(llama_cpp / "gguf-py"))
    run = subprocess.run([sys.executable, "-c", RUNNER, str(llama_cpp), "qwen35", str(folder), "--no-mtp", "--vocab-only",
                          "--outfile", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"llama.cpp's converter failed on the vocabulary:\n{run.stderr[-3000:]}")
    print(f"wrote {out} ({out.stat().st_size} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path,
                    help="llama.cpp source tree (convert_hf_to_gguf.py, conversion/, gguf-py/)")
    ap.add_argument("--out", default=OUT, type=pathlib.Path)
    args = ap.parse_args()
    if not (args.llama_cpp / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"{args.llama_cpp}/convert_hf_to_gguf.py not found: --llama-cpp must be llama.cpp's source tree")
    args.out.mkdir(parents=True, exist_ok=True)
    make_moe_source(args.out)
    tok = tiny_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        convert_vocab(args.llama_cpp, pathlib.Path(tmp), args.out / "tiny-qwen35.vocab.gguf")
        for name in MLX_FIXTURES:
            mlx_goldens(name, convert_mlx(name, pathlib.Path(tmp)), args.out)
        for fixture in GGUF_FIXTURES:
            convert_gguf(args.llama_cpp, fixture, tok, pathlib.Path(tmp),
                         args.out / f"{fixture}.llamacpp.gguf")


if __name__ == "__main__":
    main()
