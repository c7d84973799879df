#!/usr/bin/env python3
"""Encoding throughput: `dflash tokenize --bench` beside Hugging Face `tokenizers`, same text.

Both encode the whole text as one string on one thread (add_special_tokens=False), best of
--repeat runs after the first; the ids are compared by hash, so a fast wrong answer shows.

  .venv/bin/python tools/bench_tokenizer.py --tokenizer tests/data/tokenizers/qwen3
Without --file the text is the test corpus (tests/data/text_corpus) repeated to --mb MB.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fnv1a(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for k in range(4):
            h ^= (i >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def corpus_text(mb):
    d = os.path.join(ROOT, "tests", "data", "text_corpus")
    parts = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".txt"):
            with open(os.path.join(d, name), encoding="utf-8", newline="") as f:
                parts.append(f.read())
    one = "\n".join(parts)
    return one * max(1, int(mb * 1e6 / len(one.encode())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    ap.add_argument("--file", help="text file to encode (default: the corpus, repeated)")
    ap.add_argument("--mb", type=float, default=2.0, help="size of the default text in MB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dflash", default=os.path.join(ROOT, "build", "bin", "dflash"))
    args = ap.parse_args()

    if args.file:
        with open(args.file, encoding="utf-8", newline="") as f:
            text = f.read()
        path = args.file
    else:
        text = corpus_text(args.mb)
        tmp = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".txt", delete=False)
        tmp.write(text)
        tmp.close()
        path = tmp.name
    nbytes = len(text.encode())

    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    times, ids = [], None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        times.append(time.perf_counter() - t0)
    hf = {"best_s": min(times), "first_s": times[0], "tokens": len(ids), "ids_fnv1a": fnv1a(ids)}

    out = subprocess.run([args.dflash, "tokenize", "--bench", "--json", "--repeat", str(args.repeat),
                          "--tokenizer", args.tokenizer, "--file", path],
                         check=True, capture_output=True, text=True)
    ours = json.loads(out.stdout)
    if not args.file:
        os.unlink(path)

    mb = nbytes / 1e6
    print(f"text: {nbytes} bytes, {len(text)} characters; one thread, best of {args.repeat}")
    print(f"  HF tokenizers : {mb / hf['best_s']:8.2f} MB/s  (first run {mb / hf['first_s']:.2f})"
          f"  {hf['tokens']} tokens")
    print(f"  dflash        : {ours['mb_per_s']:8.2f} MB/s  (first run {ours['first_mb_per_s']:.2f})"
          f"  {ours['tokens']} tokens")
    same = ours["ids_fnv1a"] == hf["ids_fnv1a"] and ours["tokens"] == hf["tokens"]
    print(f"  ids identical : {same}   speedup {ours['mb_per_s'] * hf['best_s'] / mb:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
