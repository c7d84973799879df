"""Tiny random MoE checkpoints and golden outputs from transformers: Qwen3MoeForCausalLM, and the
Qwen3.5/3.6 hybrid MoE (Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration's text model:
routed experts always renormalised plus a shared expert behind a sigmoid gate, in every layer).

Each target is saved by transformers' own save_pretrained, in one of the two layouts it writes:
per-expert tensors (the default, `mlp.experts.<e>.{gate,up,down}_proj.weight`, as the published
Qwen3-30B-A3B files are) or fused 3-D ones (`save_original_format=False`:
`mlp.experts.gate_up_proj` [E, 2I, H] and `mlp.experts.down_proj` [E, H, I]). Goldens come from
the same library in float32 on the stored weights:

  tests/goldens/moe/<target>.safetensors
      prompt<i>.ids / .logits / .hidden    as tools/make_fixtures.py writes them
      prompt<i>.layer<l>.moe_input         each sparse layer's MoE block input [T][H]
      prompt<i>.layer<l>.router_ids        its top-k expert ids per token [T][k] (transformers' order)
      prompt<i>.layer<l>.router_weights    their weights [T][k]
      prompt<i>.layer<l>.moe_output        the block's output [T][H]
      greedy                               transformers' greedy continuation of prompt 1
  tests/goldens/moe/<draft>.safetensors    a z-lab DFlash draft over a MoE target, as
                                           tools/make_fixtures.py writes draft goldens (z-lab's
                                           own greedy spec_generate output on the MoE target)
  tests/goldens/moe/manifest.json          targets, their layouts, the smallest router margin

The Qwen3.5 MoE targets: Qwen3_5MoeForCausalLM with per-expert tensors (save_pretrained's
default, the original checkpoint format), and the multimodal class, as the published
Qwen3.5/3.6-35B-A3B are, with the text model under model.language_model and a tiny vision tower
beside it, saved with fused experts. Their block output includes the shared expert.

Run with the reference venv:  .venv-ref/bin/python tools/make_moe_fixtures.py
"""
import os

import torch
from safetensors.torch import save_file
from transformers import (Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration,
                          Qwen3_5MoeTextConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM)

from make_fixtures import (BASE, MASK_ID, PROMPTS, greedy_continuation, new_manifest, parse_args, perturb_norms,
                           record_prompt, save_drafts, save_target, target_entry, write_manifest)
from make_hybrid_fixtures import BASE as HYBRID_BASE, FULL, LIN
from make_hybrid_fixtures import make_target as make_qwen35_target

# Narrower than the dense fixtures (hidden 32, not 64) so that the experts stay small; every
# width a whole number of 32-element Q8_0 blocks, so load-time quantisation applies to them.
MOE_BASE = dict(BASE, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, moe_intermediate_size=32, num_hidden_layers=4,
                tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
# Seeds tried per target until every router choice is clear (see MIN_MARGIN).
SEEDS = 20
# The smallest gap allowed between the k-th and (k+1)-th routing probability of any token. Our
# router logits differ from transformers' by summation order (~1e-6 here), which moves a
# probability by less than that; 1e-4 leaves a 100x margin, so an exact comparison of the
# choices tests routing, not rounding.
MIN_MARGIN = 1e-4

TARGETS = {
    # f32, per-expert tensors, top-2 of 8 renormalised, one dense layer via mlp_only_layers.
    "qwen3moe-tiny": dict(dtype=torch.float32, fused=False,
                          cfg=dict(num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                   num_hidden_layers=3, mlp_only_layers=[1])),
    # bf16, fused 3-D tensors, top-3 of 6 not renormalised, every second layer sparse
    # (decoder_sparse_step 2: layers 1 and 3).
    "qwen3moe-fused-bf16": dict(dtype=torch.bfloat16, fused=True,
                                cfg=dict(num_experts=6, num_experts_per_tok=3, norm_topk_prob=False,
                                         decoder_sparse_step=2)),
    # f32, per-expert tensors, top-1 of 4 not renormalised (the weight is the softmax
    # probability, not 1), tied embeddings, every layer sparse.
    "qwen3moe-top1": dict(dtype=torch.float32, fused=False,
                          cfg=dict(num_experts=4, num_experts_per_tok=1, norm_topk_prob=False,
                                   num_hidden_layers=2, tie_word_embeddings=True)),
}

# The hybrid MoE: no dense MLP (no intermediate_size), hidden 32 as above.
HYBRID_MOE_BASE = dict(HYBRID_BASE, hidden_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                       linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=8, moe_intermediate_size=32,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                        "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]})
HYBRID_TARGETS = {
    # f32 Qwen3_5MoeForCausalLM, per-expert tensors, top-2 of 8, shared expert 64 wide.
    "qwen35moe-tiny": dict(dtype=torch.float32, fused=False,
                           cfg=dict(num_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=64,
                                    num_hidden_layers=4, layer_types=[LIN, FULL, LIN, FULL])),
    # bf16 Qwen3_5MoeForConditionalGeneration (the published class): text_config nested,
    # fused experts under model.language_model, top-3 of 6, shared expert 32 wide, tied.
    "qwen35moe-vl-bf16": dict(dtype=torch.bfloat16, fused=True, nested=True,
                              cfg=dict(num_experts=6, num_experts_per_tok=3, shared_expert_intermediate_size=32,
                                       num_hidden_layers=3, layer_types=[LIN, LIN, FULL],
                                       tie_word_embeddings=True)),
}

DRAFTS = {
    # 2 draft layers over target layers 0 and 2 (one sparse, one dense).
    "dflash-moe-tiny": dict(target="qwen3moe-tiny", layers=2,
                            dflash_config={"target_layer_ids": [0, 2], "mask_token_id": MASK_ID,
                                           "block_size": 16}),
}


def spread_routers(model, gen):
    """HF initialises routers to zero (every expert equally likely, ties everywhere): give them
    weights large enough that the top-k choice is clear of rounding."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            if name.endswith("mlp.shared_expert_gate.weight"):  # a gate logit of a few units: sigmoid far from 1/2
                p.copy_(torch.randn(p.shape, generator=gen))


def make_target(name, spec, out, gen):
    cfg = dict(MOE_BASE, **spec["cfg"])
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**cfg)).eval()
    perturb_norms(model, gen)
    spread_routers(model, gen)
    model = model.to(spec["dtype"])
    path = os.path.join(out, name)
    save_target(model, path, BASE["eos_token_id"], save_original_format=not spec["fused"])
    return Qwen3MoeForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def make_hybrid_target(name, spec, out, gen):
    return make_qwen35_target(name, spec, out, gen, base=HYBRID_MOE_BASE, init=spread_routers,
                              classes=(Qwen3_5MoeTextConfig, Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM,
                                       Qwen3_5MoeForConditionalGeneration),
                              save_original_format=not spec["fused"])


def decoder_layers(model):
    inner = model.model
    return (inner.language_model if hasattr(inner, "language_model") else inner).layers


def sparse_layers(model):
    return [i for i, layer in enumerate(decoder_layers(model)) if hasattr(layer.mlp, "gate")]


@torch.no_grad()
def target_goldens(model):
    """Logits, hidden states and, per sparse layer, the MoE block's input, routing and output."""
    g = {}
    margin = float("inf")
    for i, prompt in enumerate(PROMPTS):
        captured = {}
        hooks = []
        for l in sparse_layers(model):
            block = decoder_layers(model)[l].mlp

            def block_hook(_, args, output, l=l):
                captured[f"layer{l}.moe_input"] = args[0][0].clone()
                captured[f"layer{l}.moe_output"] = output[0].clone()

            def router_hook(_, args, output, l=l):
                logits, weights, ids = output
                captured[f"layer{l}.router_ids"] = ids.to(torch.int32)
                captured[f"layer{l}.router_weights"] = weights.float()
                probs = torch.softmax(logits.float(), dim=-1).sort(dim=-1, descending=True).values
                k = ids.shape[-1]
                captured[f"layer{l}.margin"] = float((probs[:, k - 1] - probs[:, k]).min())

            hooks.append(block.register_forward_hook(block_hook))
            hooks.append(block.gate.register_forward_hook(router_hook))
        ids = torch.tensor([prompt])
        out = model(ids, output_hidden_states=True)
        for h in hooks:
            h.remove()
        record_prompt(g, i, ids, out)
        for key, value in captured.items():
            if key.endswith(".margin"):
                margin = min(margin, value)
            else:
                g[f"prompt{i}.{key}"] = value.float() if value.is_floating_point() else value
    g["greedy"] = greedy_continuation(model)
    return g, margin


def save_moe_targets(targets, make, args, manifest, models):
    for name, spec in targets.items():
        for seed in range(SEEDS):
            model = make(name, spec, args.out, torch.Generator().manual_seed(1000 * len(name) + seed))
            goldens, margin = target_goldens(model)
            if margin >= MIN_MARGIN:
                break
        else:
            raise SystemExit(f"{name}: no seed of {SEEDS} gave router margins above {MIN_MARGIN}")
        save_file(goldens, os.path.join(args.goldens, f"{name}.safetensors"))
        models[name] = model
        manifest["targets"][name] = dict(target_entry(name, spec),
                                         layout="fused" if spec["fused"] else "per-expert",
                                         sparse_layers=sparse_layers(model), seed=seed,
                                         min_router_margin=margin)
        print(f"target {name}: saved ({manifest['targets'][name]['layout']}, "
              f"sparse layers {sparse_layers(model)}, router margin {margin:.2e})", flush=True)


def main():
    args = parse_args(__doc__, "tests/goldens/moe")
    manifest = new_manifest()
    models = {}
    save_moe_targets(TARGETS, make_target, args, manifest, models)
    save_drafts(DRAFTS, models, args, manifest)
    # After the drafts, so that the Qwen3 MoE fixtures above draw the same random numbers as
    # before these were added (byte-identical files).
    save_moe_targets(HYBRID_TARGETS, make_hybrid_target, args, manifest, models)
    write_manifest(manifest, os.path.join(args.goldens, "manifest.json"))


if __name__ == "__main__":
    main()
