#!/usr/bin/env python3
"""DFlash drafts in GGUF exactly as llama.cpp writes them: its own convert_hf_to_gguf.py with its
bundled gguf-py, run on the z-lab-format fixture drafts (tests/fixtures/dflash-tiny, -sliding).

  tests/goldens/gguf/dflash-tiny.llamacpp.gguf     arch "dflash": fc, enc.output_norm, blk.N.*,
                                                   dflash.target_layers (= target_layer_ids + 1),
                                                   dflash.block_size, tokenizer.ggml.mask_token_id
  tests/goldens/gguf/dflash-sliding.llamacpp.gguf  the same with sliding layers
                                                   (attention.sliding_window + _pattern)

F32 (--outtype f32), so z-lab's goldens for the safetensors drafts apply unchanged.

The converter takes the tokenizer from the target (--target-model-dir). The fixture target has
none and a 256-id vocabulary; a BPE tokenizer.json would have to be one llama.cpp recognises by
hash (a real one: 151k ids, megabytes of metadata), so the target directory given to it holds the
fixture target's config.json plus a 200-piece SentencePiece model trained here on README.md
(the converter's SentencePiece path pads the vocabulary to the draft's vocab_size). dflash.cpp
uses the target's tokenizer, never the draft file's, so the draft's vocabulary is only metadata.

Needs torch and sentencepiece (both in .venv-ref; tools/requirements-ref.txt):
  .venv-ref/bin/python tools/make_llamacpp_dflash_gguf.py \\
      --llama-cpp /tmp/llama-sdist/llama_cpp_python-0.3.36/vendor/llama.cpp
"""
import argparse
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

ROOT = pathlib.Path(__file__).resolve().parent.parent
DRAFTS = {"dflash-tiny": "qwen3-tiny", "dflash-sliding": "qwen3-tiny", "dflash2-tiny": "qwen3-tiny"}


def target_dir_with_tokenizer(scratch, target):
    """The fixture target's config.json and a tiny SentencePiece model, for the converter's vocab."""
    out = scratch / target
    out.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / target / "config.json", out / "config.json")
    lines = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=200,
                                   model_type="bpe", num_threads=1, minloglevel=2)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path,
                    help="llama.cpp source tree (convert_hf_to_gguf.py, conversion/, gguf-py/)")
    ap.add_argument("--out", default=ROOT / "tests" / "goldens" / "gguf", type=pathlib.Path)
    args = ap.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    if not converter.is_file():
        sys.exit(f"{converter} not found: --llama-cpp must be llama.cpp's source tree")
    env = dict(os.environ, PYTHONPATH=str(args.llama_cpp / "gguf-py"))
    with tempfile.TemporaryDirectory() as tmp:
        scratch = pathlib.Path(tmp)
        targets = {t: target_dir_with_tokenizer(scratch, t) for t in set(DRAFTS.values())}
        for draft, target in DRAFTS.items():
            out = args.out / f"{draft}.llamacpp.gguf"
            subprocess.run([sys.executable, str(converter), str(ROOT / "tests" / "fixtures" / draft),
                            "--target-model-dir", str(targets[target]), "--outtype", "f32",
                            "--outfile", str(out)], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
