"""Random-weight model pairs with the REAL shapes of published checkpoints, for benchmarks.

Speed depends on shapes, not on weight values, so a random Qwen3-0.6B with a 5-layer z-lab
draft measures decode and verify cost exactly like the real one would, without a download.
(Acceptance on random weights is meaningless; use the shipped pair for tau.)

  .venv-ref/bin/python tools/make_random_pair.py --shape qwen3-0.6b --out artifacts/random-qwen3-0.6b
writes OUT/target (transformers Qwen3ForCausalLM.save_pretrained, bf16) and OUT/draft
(z-lab dflash.model.DFlashDraftModel.save_pretrained, bf16).
"""
import argparse
import os

import torch
from dflash.model import DFlashDraftModel
from transformers import Qwen3Config, Qwen3ForCausalLM

# Target shapes from the published config.json files; draft as z-lab's Qwen3 drafts (5 layers).
SHAPES = {
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, tie_word_embeddings=True, rope_theta=1000000.0,
                       max_position_embeddings=40960),
    "qwen3-1.7b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, tie_word_embeddings=True, rope_theta=1000000.0,
                       max_position_embeddings=40960),
}
DRAFT_LAYERS = 5
MASK_TOKEN_ID = 151669  # as in z-lab's Qwen3 drafts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    shape = dict(SHAPES[args.shape])
    theta = shape.pop("rope_theta")
    tcfg = Qwen3Config(**shape, rope_parameters={"rope_type": "default", "rope_theta": theta},
                       eos_token_id=151645, bos_token_id=None)
    print(f"target {args.shape}: initialising random weights ...", flush=True)
    target = Qwen3ForCausalLM(tcfg).to(torch.bfloat16).eval()
    target.save_pretrained(os.path.join(args.out, "target"))
    del target

    L = shape["num_hidden_layers"]
    ids = [round(1 + i * (L - 4) / (DRAFT_LAYERS - 1)) for i in range(DRAFT_LAYERS)]
    dshape = dict(shape, num_hidden_layers=DRAFT_LAYERS)
    dcfg = Qwen3Config(**dshape, rope_parameters={"rope_type": "default", "rope_theta": theta})
    dcfg.architectures = ["DFlashDraftModel"]
    dcfg.block_size = 16
    dcfg.num_target_layers = L
    dcfg.dflash_config = {"target_layer_ids": ids, "mask_token_id": MASK_TOKEN_ID}
    print(f"draft: {DRAFT_LAYERS} layers, target_layer_ids {ids}", flush=True)
    draft = DFlashDraftModel(dcfg).to(torch.bfloat16).eval()
    draft.save_pretrained(os.path.join(args.out, "draft"))
    print(f"wrote {args.out}/target and {args.out}/draft", flush=True)


if __name__ == "__main__":
    main()
