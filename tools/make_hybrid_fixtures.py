"""Tiny random Qwen3.5 hybrid checkpoints (Gated DeltaNet + gated attention) and their goldens.

Targets are saved by transformers (Qwen3_5ForCausalLM, and Qwen3_5ForConditionalGeneration for
the nested `text_config` layout with vision tensors beside the text model); the draft by z-lab's
`dflash` package. Goldens come from transformers in float32, with its pure-torch delta rule
(no flash-linear-attention installed):

  tests/goldens/<target>.safetensors   logits and every hidden state for the fixed prompts of
                                       tools/make_fixtures.py, transformers' greedy
                                       continuation, and per linear-attention layer the conv
                                       state ([conv_dim][kernel]) and recurrent state
                                       ([value heads][key dim][value dim]) after prompt 2
  tests/goldens/<draft>.safetensors    the draft's block logits for a fixed context, as
                                       make_fixtures.py's drafts. Not z-lab's dflash_generate
                                       output: on a hybrid target its loop crops the cache, and
                                       transformers cannot crop a recurrent state, so its output
                                       departs from plain greedy (seen with transformers 5.15:
                                       token 3 differs with every draft rejected)
  tests/goldens/hybrid_manifest.json   which fixture pairs with which

The (1 + w) RMSNorm weights (initialised to 0), dt_bias (initialised to 1), A_log and the
gated norm's plain weights are randomised so that a w-versus-(1 + w) or sign bug fails.

Run with the reference venv:  .venv-ref/bin/python tools/make_hybrid_fixtures.py
"""
import argparse
import json
import os
import shutil

import torch
from safetensors.torch import save_file
from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                          Qwen3_5TextConfig)

from make_fixtures import GREEDY_NEW, MASK_ID, PROMPTS, SPEC_NEW, VOCAB, draft_goldens, make_draft

LIN, FULL = "linear_attention", "full_attention"

BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=512,
            initializer_range=0.1, bos_token_id=None, eos_token_id=VOCAB - 2,
            linear_conv_kernel_dim=4)

TARGETS = {
    # f32, untied, 3:1 pattern, rotary on a quarter of the head, 2 value heads per key head,
    # key head dim != value head dim.
    "qwen35-tiny": dict(dtype=torch.float32, cfg=dict(
        tie_word_embeddings=False, num_hidden_layers=4, layer_types=[LIN, LIN, LIN, FULL],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=8,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]})),
    # bf16, tied, another pattern, half rotary, 3 value heads per key head.
    "qwen35-tied-bf16": dict(dtype=torch.bfloat16, cfg=dict(
        tie_word_embeddings=True, num_hidden_layers=5, layer_types=[LIN, FULL, LIN, LIN, FULL],
        num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=8,
        linear_value_head_dim=16,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                         "partial_rotary_factor": 0.5, "mrope_section": [2, 2, 4]})),
    # The published layout: Qwen3_5ForConditionalGeneration, text_config nested, the text
    # model under model.language_model, a (tiny) vision tower beside it.
    "qwen35-vl": dict(dtype=torch.float32, nested=True, cfg=dict(
        tie_word_embeddings=False, num_hidden_layers=4, layer_types=[LIN, FULL, LIN, FULL],
        linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8,
        linear_value_head_dim=8,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]})),
}
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=64,
              patch_size=4, num_position_embeddings=16)

DRAFTS = {
    # z-lab's drafts for Qwen3.5 are DFlashDraftModel with plain Qwen3 layers and full rotary.
    "dflash-qwen35": dict(target="qwen35-tiny", layers=2,
                          cfg=dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                          dflash_config={"target_layer_ids": [0, 2], "mask_token_id": MASK_ID,
                                         "block_size": 16}),
}


def randomise(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.norm.weight"):  # gated RMSNorm: plain weight, init 1
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "norm" in name and "visual" not in name:  # (1 + w) RMSNorms, init 0
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("dt_bias"):
                p.copy_(1.0 + 0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(0.05, 1.5, generator=gen).log())


def make_target(name, spec, out, gen):
    text = Qwen3_5TextConfig(**dict(BASE, **spec["cfg"]))
    if spec.get("nested"):
        cls = Qwen3_5ForConditionalGeneration
        model = cls(Qwen3_5Config(text_config=text.to_dict(), vision_config=VISION,
                                  tie_word_embeddings=text.tie_word_embeddings))
    else:
        cls = Qwen3_5ForCausalLM
        model = cls(text)
    model.eval()
    randomise(model, gen)
    model = model.to(spec["dtype"])
    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [BASE["eos_token_id"]], "do_sample": False}, f, indent=2)
    return cls.from_pretrained(path, dtype=torch.float32).eval()


@torch.no_grad()
def target_goldens(model):
    g = {}
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt])
        out = model(ids, output_hidden_states=True, use_cache=True)
        g[f"prompt{i}.ids"] = ids[0].to(torch.int32)
        g[f"prompt{i}.logits"] = out.logits[0].float()
        g[f"prompt{i}.hidden"] = torch.stack([h[0] for h in out.hidden_states]).float()
    cache = out.past_key_values  # after the last (longest) prompt
    types = model.config.get_text_config().layer_types
    linear = [i for i, t in enumerate(types) if t == LIN]
    g["state.conv"] = torch.stack([cache.layers[i].conv_states[0][0] for i in linear]).float()
    g["state.recurrent"] = torch.stack([cache.layers[i].recurrent_states[0][0] for i in linear]).float()
    prompt = torch.tensor([PROMPTS[1]])
    gen = model.generate(prompt, max_new_tokens=GREEDY_NEW, min_new_tokens=GREEDY_NEW,
                         do_sample=False, eos_token_id=None, pad_token_id=0)
    g["greedy"] = gen[0, prompt.shape[1]:].to(torch.int32)
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--goldens", default="tests/goldens")
    args = ap.parse_args()
    torch.manual_seed(0)
    manifest = {"prompts": PROMPTS, "greedy_new": GREEDY_NEW, "spec_new": SPEC_NEW,
                "targets": {}, "drafts": {}}
    targets = {}
    for name, spec in TARGETS.items():
        model = make_target(name, spec, args.out, torch.Generator().manual_seed(len(name)))
        targets[name] = model
        save_file(target_goldens(model), os.path.join(args.goldens, f"{name}.safetensors"))
        manifest["targets"][name] = {"golden": f"{name}.safetensors",
                                     "dtype": str(spec["dtype"]).removeprefix("torch.")}
        print(f"target {name}: saved", flush=True)
    for name, spec in DRAFTS.items():
        target = targets[spec["target"]]
        draft = make_draft(name, spec, target.config, args.out)
        block = {k: v for k, v in draft_goldens(draft, target).items() if k.startswith("block.")}
        save_file(block, os.path.join(args.goldens, f"{name}.safetensors"))
        manifest["drafts"][name] = {"golden": f"{name}.safetensors", "target": spec["target"],
                                    "block_size": draft.block_size}
        print(f"draft {name}: saved (target {spec['target']}, block {draft.block_size})", flush=True)
    with open(os.path.join(args.goldens, "hybrid_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
