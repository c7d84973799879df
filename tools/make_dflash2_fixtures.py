"""A tiny DFlash2 draft (z-lab dflash 0.1.0's DFlash2DraftModel) over tests/fixtures/qwen3-tiny,
and goldens from the package itself in float32:

  tests/fixtures/dflash2-tiny/                 config.json + model.safetensors as the package's
                                               save_pretrained writes them, except that the
                                               predecessor codebook is stored without its
                                               ".weight" suffix (published files use either
                                               name; the package maps both on load)
  tests/goldens/dflash2-tiny.safetensors
    block.context, block.anchor                prompt 2 of tools/make_fixtures.py and the
                                               target's greedy token after it
    block.logits       [B-1][V]                the draft's logits for [anchor, MASK x (B-1)]
    greedy.path        [B-1]                   CandidateSelector.select at temperature 0
    greedy.candidates  [B-1][k]                its candidate ids per row (torch.topk,
                                               sorted=False: compare as sets)
    sampled.path, sampled.candidates, sampled.q [B-1][k]
                                               select at temperature sampled.temperature: the
                                               path torch.multinomial drew and each row's q
                                               (softmax(scores / T)) given that path
    spec.output, spec.acceptance_lengths       z-lab's greedy dflash_generate on prompt 1
  tests/goldens/dflash2_manifest.json          target, draft, block size, temperature

The package leaves base_kernel uninitialised (torch.empty): here every tensor is set from a
seeded generator. The codebooks and hidden_projection are scaled up so that the selector's
pairwise term changes the greedy path against plain argmax (checked below), and tap 0 of each
base kernel is near 1 so that activations keep their scale through the convolutions.

Run with the reference venv (after tools/make_fixtures.py made qwen3-tiny):
  .venv-ref/bin/python tools/make_dflash2_fixtures.py
"""
import argparse
import json
import os
import shutil
import time

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

import dflash.model as zlab
from dflash.model import DFlash2DraftModel

from make_fixtures import MASK_ID, PROMPTS, SPEC_NEW, write_manifest

NAME = "dflash2-tiny"
TARGET = "qwen3-tiny"
TEMPERATURE = 0.8
DFLASH_CONFIG = {"target_layer_ids": [0, 2], "mask_token_id": MASK_ID, "block_size": 16,
                 "conv_kernel_size": 3, "conv_group_size": 16, "selector_rank": 8,
                 "selector_top_k": 6}


def make_draft(target_cfg, out, gen):
    tcfg = target_cfg.to_dict()
    cfg = {k: tcfg[k] for k in ("vocab_size", "hidden_size", "intermediate_size",
                                "num_attention_heads", "num_key_value_heads", "head_dim",
                                "rms_norm_eps", "max_position_embeddings", "rope_parameters",
                                "initializer_range")}
    config = Qwen3Config(**cfg, num_hidden_layers=2)
    config.architectures = ["DFlash2DraftModel"]
    config.num_target_layers = target_cfg.num_hidden_layers
    config.dflash_config = DFLASH_CONFIG
    model = DFlash2DraftModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("base_kernel"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
                p[:, 0] += 1.0
            elif "codebook" in name:
                p.copy_(1.5 * torch.randn(p.shape, generator=gen))
            elif "hidden_projection" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    path = os.path.join(out, NAME)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path)
    # The published spelling for one codebook: no ".weight".
    weights = os.path.join(path, "model.safetensors")
    tensors = load_file(weights)
    tensors["candidate_selector.predecessor_codebook"] = tensors.pop(
        "candidate_selector.predecessor_codebook.weight")
    save_file(tensors, weights, metadata={"format": "pt"})
    loaded = DFlash2DraftModel.from_pretrained(path, dtype=torch.float32).eval()
    state = loaded.state_dict()
    for name, value in tensors.items():  # both codebook spellings loaded, nothing left random
        key = name if name in state else name + ".weight"
        assert torch.equal(state[key], value.float()), f"{name} did not load as saved"
    return loaded


@torch.no_grad()
def goldens(draft, target):
    g = {}
    ctx = torch.tensor([PROMPTS[2]])
    out = target(ctx, output_hidden_states=True)
    features = zlab.extract_context_feature(out.hidden_states, draft.target_layer_ids)
    B = draft.block_size
    anchor = int(out.logits[0, -1].argmax())
    block = torch.tensor([[anchor] + [draft.mask_token_id] * (B - 1)])
    pos = torch.arange(ctx.shape[1] + B)[None]
    noise = zlab._raw_input_embeddings(target, block)
    hidden = draft(target_hidden=features, noise_embedding=noise, position_ids=pos)[:, 1:]
    head = zlab._output_head(target)
    logits = draft.compute_logits(hidden, head)
    g["block.context"] = ctx[0].to(torch.int32)
    g["block.anchor"] = torch.tensor([anchor], dtype=torch.int32)
    g["block.logits"] = logits[0].float()

    anchors = torch.tensor([anchor])
    path, candidates, _ = draft.propose(hidden, anchors, head, 0.0)
    unchanged = int((path[0] == logits[0].argmax(-1)).sum())
    assert unchanged < B - 1, "the selector's pairwise term never changes the greedy path"
    print(f"greedy path: {B - 1 - unchanged} of {B - 1} rows differ from argmax(logits)")
    g["greedy.path"] = path[0].to(torch.int32)
    g["greedy.candidates"] = candidates[0].to(torch.int32)

    torch.manual_seed(1)
    path, candidates, q = draft.propose(hidden, anchors, head, TEMPERATURE)
    g["sampled.path"] = path[0].to(torch.int32)
    g["sampled.candidates"] = candidates[0].to(torch.int32)
    g["sampled.q"] = q[0].float()

    zlab._cuda_time = time.perf_counter  # z-lab times cycles with torch.cuda.synchronize
    prompt = torch.tensor([PROMPTS[1]])
    res = zlab.dflash_generate(draft, target, prompt, max_new_tokens=SPEC_NEW, stop_token_ids=None,
                               temperature=0.0, return_stats=True)
    g["spec.output"] = res.output_ids[0, prompt.shape[1]:].to(torch.int32)
    g["spec.acceptance_lengths"] = torch.tensor(res.acceptance_lengths, dtype=torch.int32)
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--goldens", default="tests/goldens")
    ap.add_argument("--target", default=os.path.join("tests/fixtures", TARGET))
    args = ap.parse_args()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.goldens, exist_ok=True)
    target = Qwen3ForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    draft = make_draft(target.config, args.out, torch.Generator().manual_seed(2))
    save_file(goldens(draft, target), os.path.join(args.goldens, f"{NAME}.safetensors"))
    write_manifest({"target": TARGET, "draft": NAME, "block_size": draft.block_size,
                    "temperature": TEMPERATURE, "prompt": PROMPTS[1], "spec_new": SPEC_NEW},
                   os.path.join(args.goldens, "dflash2_manifest.json"))
    print(f"draft {NAME}: saved (target {TARGET})")


if __name__ == "__main__":
    main()
