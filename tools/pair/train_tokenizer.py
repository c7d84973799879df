"""Byte-level BPE tokenizer for the pair, laid out like Qwen's so the engine loads it the same way.

Same normalizer (NFC), pre-tokenizer (Qwen2 split regex + byte-level), decoder and post-processor
as Qwen3's tokenizer.json; 4096 ids in all. The special tokens come first:
  0 <|endoftext|>  (pad, document separator)   1 <|im_start|>   2 <|im_end|>  (eos)
  3 <|mask|>  (the DFlash draft's mask_token_id; in the target's vocab so both share one table)
tokenizer_config.json carries a ChatML chat_template like Qwen2.5's, without tool calls.

Then the corpus is tokenized once into uint16 arrays for the trainers:
  work/tokenizer/{tokenizer.json,tokenizer_config.json}, work/{train,heldout}.bin
With --reuse DIR nothing is trained: the corpus is encoded with DIR/tokenizer.json (the shipped
models/dflash-pair/target), so the bins match the ids the shipped target was trained on.
"""
import argparse
import json
import os

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
          " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")


def docs(path):
    with open(path) as f:
        for line in f:
            yield json.loads(line)["text"]


def build(vocab_size, train_jsonl):
    tok = Tokenizer(models.BPE(byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs(train_jsonl), trainer=trainer)
    return tok


def tokenizer_config():
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, s in enumerate(SPECIALS)}
    return {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
            "additional_special_tokens": SPECIALS[1:], "bos_token": None, "chat_template": CHATML,
            "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
            "model_max_length": 4096, "pad_token": "<|endoftext|>", "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}


def encode_split(tok, jsonl, out_bin):
    eot = tok.token_to_id("<|endoftext|>")
    texts = list(docs(jsonl))
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    arr = np.asarray(ids, dtype=np.uint16)
    arr.tofile(out_bin)
    return len(arr), sum(len(t.encode()) for t in texts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--reuse", metavar="DIR", help="encode with DIR/tokenizer.json instead of training one")
    args = ap.parse_args()
    if args.reuse:
        tok = Tokenizer.from_file(os.path.join(args.reuse, "tokenizer.json"))
    else:
        tok = build(args.vocab, os.path.join(args.work, "train.jsonl"))
        out = os.path.join(args.work, "tokenizer")
        os.makedirs(out, exist_ok=True)
        tok.save(os.path.join(out, "tokenizer.json"))
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(tokenizer_config(), f, indent=2)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    print(f"vocab {tok.get_vocab_size()}")
    for split in ("train", "heldout"):
        n, nbytes = encode_split(tok, os.path.join(args.work, f"{split}.jsonl"), os.path.join(args.work, f"{split}.bin"))
        print(f"{split}: {n} tokens ({nbytes / n:.2f} bytes/token)")


if __name__ == "__main__":
    main()
