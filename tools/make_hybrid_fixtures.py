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
import os

import torch
from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                          Qwen3_5TextConfig)

from make_fixtures import (MASK_ID, PROMPTS, VOCAB, block_goldens, greedy_continuation, new_manifest, parse_args,
                           record_prompt, save_drafts, save_target, save_targets, write_manifest)

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


DENSE = (Qwen3_5TextConfig, Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration)


def make_target(name, spec, out, gen, base=BASE, classes=DENSE, init=None, **save_kwargs):
    """A Qwen3.5 target of `classes` (text config, multimodal config, text model, multimodal
    model: the MoE family passes its own), randomised (then `init`), saved and reloaded in f32."""
    text_config, config, text_model, nested_model = classes
    text = text_config(**dict(base, **spec["cfg"]))
    if spec.get("nested"):
        cls = nested_model
        model = cls(config(text_config=text.to_dict(), vision_config=VISION,
                           tie_word_embeddings=text.tie_word_embeddings))
    else:
        cls = text_model
        model = cls(text)
    model.eval()
    randomise(model, gen)
    if init:
        init(model, gen)
    model = model.to(spec["dtype"])
    path = os.path.join(out, name)
    save_target(model, path, base["eos_token_id"], **save_kwargs)
    return cls.from_pretrained(path, dtype=torch.float32).eval()


@torch.no_grad()
def target_goldens(model):
    g = {}
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt])
        out = model(ids, output_hidden_states=True, use_cache=True)
        record_prompt(g, i, ids, out)
    cache = out.past_key_values  # after the last (longest) prompt
    types = model.config.get_text_config().layer_types
    linear = [i for i, t in enumerate(types) if t == LIN]
    g["state.conv"] = torch.stack([cache.layers[i].conv_states[0][0] for i in linear]).float()
    g["state.recurrent"] = torch.stack([cache.layers[i].recurrent_states[0][0] for i in linear]).float()
    g["greedy"] = greedy_continuation(model)
    return g


def main():
    args = parse_args(__doc__, "tests/goldens")
    manifest = new_manifest()
    targets = save_targets(TARGETS, make_target, target_goldens, args, manifest)
    save_drafts(DRAFTS, targets, args, manifest, goldens=block_goldens)
    write_manifest(manifest, os.path.join(args.goldens, "hybrid_manifest.json"))


if __name__ == "__main__":
    main()
