#!/usr/bin/env python3
"""Tensor layouts as the reference libraries save them, for tests/py/test_random_pair.py.

For a tiny config of each architecture tools/make_random_pair.py writes, the model is built by
transformers (z-lab's `dflash` for the draft), saved with save_pretrained in bf16, and the saved
files are read back: config.json as written and every tensor's name, shape and dtype. The test
(numpy only: CI has no torch) feeds that config.json to the generator and expects exactly the
same tensors. Qwen3.5 ForConditionalGeneration checkpoints also hold a vision tower; the
generator writes the text model only, so model.visual.* are listed apart ("skipped").

  .venv-ref/bin/python tools/make_layout_listings.py   [--out tests/goldens/layouts]
"""
import argparse
import json
import pathlib
import tempfile

import torch
from safetensors import safe_open
from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                          Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration, Qwen3_5TextConfig,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

from dflash.model import DFlashDraftModel

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMALL = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=256)
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
              linear_value_head_dim=6, linear_conv_kernel_dim=4)
TINY_VISION = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32,
                   num_position_embeddings=16)


def qwen3_draft():
    cfg = Qwen3Config(**SMALL, num_hidden_layers=3)
    cfg.architectures = ["DFlashDraftModel"]
    cfg.block_size = 16
    cfg.num_target_layers = 6
    cfg.dflash_config = {"target_layer_ids": [1, 2, 3], "mask_token_id": 95}
    return DFlashDraftModel(cfg)


MODELS = {
    "qwen3-untied-bias": lambda: Qwen3ForCausalLM(Qwen3Config(**SMALL, num_hidden_layers=2,
                                                               attention_bias=True,
                                                               tie_word_embeddings=False)),
    "qwen3-tied": lambda: Qwen3ForCausalLM(Qwen3Config(**SMALL, num_hidden_layers=2,
                                                        tie_word_embeddings=True)),
    # Layer 0 is in mlp_only_layers, layer 2 fails decoder_sparse_step 2: both dense.
    "qwen3-moe": lambda: Qwen3MoeForCausalLM(Qwen3MoeConfig(
        **SMALL, num_hidden_layers=4, num_experts=3, num_experts_per_tok=2, moe_intermediate_size=16,
        decoder_sparse_step=2, mlp_only_layers=[0], tie_word_embeddings=False)),
    "qwen3_5-causal-lm": lambda: Qwen3_5ForCausalLM(Qwen3_5TextConfig(
        **SMALL, **LINEAR, num_hidden_layers=3,
        layer_types=["linear_attention", "full_attention", "linear_attention"], tie_word_embeddings=True)),
    "qwen3_5-conditional": lambda: Qwen3_5ForConditionalGeneration(Qwen3_5Config(
        text_config=dict(**SMALL, **LINEAR, num_hidden_layers=4), vision_config=TINY_VISION)),
    "qwen3_5-moe-conditional": lambda: Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(
        text_config=dict(**SMALL, **LINEAR, num_hidden_layers=2, full_attention_interval=2, num_experts=3,
                         num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24),
        vision_config=TINY_VISION)),
    "dflash-draft": qwen3_draft,
}


def listing(model):
    with tempfile.TemporaryDirectory() as tmp:
        model.to(torch.bfloat16).save_pretrained(tmp)
        config = json.loads((pathlib.Path(tmp) / "config.json").read_text())
        tensors, skipped = [], []
        for path in sorted(pathlib.Path(tmp).glob("*.safetensors")):
            with safe_open(str(path), "pt") as f:
                for name in f.keys():
                    t = f.get_slice(name)
                    row = [name, list(t.get_shape()), t.get_dtype()]
                    (skipped if name.startswith("model.visual.") else tensors).append(row)
    return {"config": config, "tensors": sorted(tensors), "skipped": sorted(skipped)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=ROOT / "tests" / "goldens" / "layouts", type=pathlib.Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name, make in MODELS.items():
        out = args.out / f"{name}.json"
        result = listing(make().eval())
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}: {len(result['tensors'])} tensors ({len(result['skipped'])} vision tensors skipped)")


if __name__ == "__main__":
    main()
