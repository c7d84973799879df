"""Offline training corpus: the Python source of CPython 3.11's standard library.

Why this source: it is installed on every build machine (pyenv's upstream CPython 3.11.7, or any
CPython 3.11 via --root), needs no download, and is under the PSF License Agreement, which allows
copying, modification and redistribution of derived works (the model weights) with the licence
notice kept; models/dflash-pair/README.md carries that notice.

Files: every *.py under the stdlib root, skipping site-packages (third-party code, other licences)
and files that are not UTF-8 or are over 256 KB (generated tables such as pydoc_data/topics.py).
The split is per file and deterministic: a file is held out when the first byte of
sha256(relative path) is < 13 (about 5%), so the split does not depend on the file system order.

  .venv-ref/bin/python tools/pair/corpus.py   ->  tools/pair/work/{train,heldout}.jsonl
"""
import argparse
import hashlib
import json
import os
import sys

DEFAULT_ROOT = os.path.expanduser("~/.pyenv/versions/3.11.7/lib/python3.11")
MAX_FILE_BYTES = 256 * 1024
HELDOUT_BYTE_BELOW = 13  # 13/256 ~ 5% of files


def stdlib_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "__pycache__"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, root), path


def is_heldout(relpath):
    return hashlib.sha256(relpath.encode()).digest()[0] < HELDOUT_BYTE_BELOW


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=DEFAULT_ROOT, help="CPython 3.11 Lib directory")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "work"))
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.root, "LICENSE.txt")):
        sys.exit(f"{args.root}: no LICENSE.txt; pass --root pointing at a CPython Lib directory")
    os.makedirs(args.out, exist_ok=True)
    counts = {"train": [0, 0], "heldout": [0, 0]}
    skipped = 0
    with open(os.path.join(args.out, "train.jsonl"), "w") as train, \
         open(os.path.join(args.out, "heldout.jsonl"), "w") as heldout:
        for rel, path in stdlib_files(args.root):
            if os.path.getsize(path) > MAX_FILE_BYTES:
                skipped += 1
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except UnicodeDecodeError:
                skipped += 1
                continue
            if not text.strip():
                continue
            split = "heldout" if is_heldout(rel) else "train"
            (heldout if split == "heldout" else train).write(json.dumps({"path": rel, "text": text}) + "\n")
            counts[split][0] += 1
            counts[split][1] += len(text.encode())
    for split, (files, size) in counts.items():
        print(f"{split}: {files} files, {size / 1e6:.2f} MB")
    print(f"skipped {skipped} files (too large or not UTF-8)")


if __name__ == "__main__":
    main()
