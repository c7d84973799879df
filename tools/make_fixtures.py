"""Tiny random checkpoints and golden outputs from the reference libraries, for `make test`.

Targets are saved by transformers (Qwen3ForCausalLM.save_pretrained), drafts by z-lab's
`dflash` package (DFlashDraftModel.save_pretrained), so the files are in exactly the
published layouts. Goldens come from those same libraries running in float32:

  tests/goldens/<target>.safetensors   logits and every hidden state for fixed prompts,
                                       plus transformers' greedy continuation
  tests/goldens/<draft>.safetensors    draft block logits for a fixed context, and z-lab's
                                       own greedy spec_generate output and acceptance lengths
  tests/goldens/manifest.json          which fixture pairs with which, prompts, lengths

Run with the reference venv:  make goldens   (= .venv-ref/bin/python tools/make_fixtures.py)
"""
import argparse
import copy
import json
import os
import shutil
import time

import torch
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

import dflash.model as zlab
from dflash.model import DFlashDraftModel

VOCAB = 256
MASK_ID = VOCAB - 1
# Fixed prompts (token ids), short enough that goldens stay small, long enough to cross a
# 16-key attention tile and several prefill chunks.
PROMPTS = [
    [17],
    [3, 141, 59, 26, 53, 58, 97],
    [(i * 37 + 11) % (VOCAB - 1) for i in range(40)],
]
GREEDY_NEW = 24
SPEC_NEW = 40

BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
            max_position_embeddings=512, initializer_range=0.1, bos_token_id=None,
            eos_token_id=VOCAB - 2)

TARGETS = {
    # f32, untied, GQA 2:1.
    "qwen3-tiny": dict(dtype=torch.float32, cfg=dict(tie_word_embeddings=False)),
    # bf16, tied embeddings, GQA 4:1, attention biases.
    "qwen3-tied-bf16": dict(dtype=torch.bfloat16,
                            cfg=dict(tie_word_embeddings=True, num_attention_heads=4,
                                     num_key_value_heads=1, head_dim=32, attention_bias=True)),
    # YaRN rope (transformers 5 rope_parameters); a copy with the legacy rope_scaling block.
    "qwen3-yarn": dict(dtype=torch.float32,
                       cfg=dict(max_position_embeddings=256,
                                rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                                 "factor": 4.0,
                                                 "original_max_position_embeddings": 64}),
                       legacy_copy="qwen3-yarn-legacy"),
    # Linear rope scaling, f16 weights, saved in shards with an index.
    "qwen3-linear-sharded": dict(dtype=torch.float16,
                                 cfg=dict(num_attention_heads=8, num_key_value_heads=8, head_dim=8,
                                          rope_parameters={"rope_type": "linear",
                                                           "rope_theta": 50000.0, "factor": 2.0}),
                                 shard="200KB"),
}

DRAFTS = {
    # F = 2 target layers, L = 2 draft layers, full attention, fields nested in dflash_config.
    "dflash-tiny": dict(target="qwen3-tiny", layers=2,
                        dflash_config={"target_layer_ids": [0, 2], "mask_token_id": MASK_ID,
                                       "block_size": 16}),
    # F = 2 target layers != L = 3 draft layers; sliding and full layers; block size 8.
    "dflash-sliding": dict(target="qwen3-tiny", layers=3,
                           cfg=dict(layer_types=["sliding_attention", "full_attention",
                                                 "sliding_attention"], sliding_window=8,
                                    use_sliding_window=True),
                           dflash_config={"target_layer_ids": [1, 3], "mask_token_id": MASK_ID,
                                          "block_size": 8}),
    # Legacy top-level fields (no dflash_config, ids derived from num_target_layers); bf16,
    # for the tied bf16 target.
    "dflash-tied": dict(target="qwen3-tied-bf16", layers=1, dtype=torch.bfloat16, top_level={"mask_token_id": MASK_ID,
                                                                       "block_size": 16}),
}


def perturb_norms(model, gen):
    """HF initialises RMSNorm weights to 1, which would hide a norm that is never applied."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def save_target(model, path, eos_token_id, **save_kwargs):
    """save_pretrained into a fresh `path`, with a greedy generation_config.json beside it."""
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, **save_kwargs)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [eos_token_id], "do_sample": False}, f, indent=2)


def make_target(name, spec, out, gen):
    cfg = dict(BASE, **spec["cfg"])
    cfg.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": 10000.0})
    model = Qwen3ForCausalLM(Qwen3Config(**cfg)).eval()
    perturb_norms(model, gen)
    model = model.to(spec["dtype"])
    path = os.path.join(out, name)
    save_target(model, path, BASE["eos_token_id"], max_shard_size=spec.get("shard", "50GB"))
    if "legacy_copy" in spec:
        write_legacy_rope_copy(path, os.path.join(out, spec["legacy_copy"]))
    # The reference runs in float32 on the stored (possibly rounded) weights, as we do.
    return Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def write_legacy_rope_copy(src, dst):
    """Same weights, config in the pre-transformers-5 style: rope_theta + rope_scaling."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    rope = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    cfg["rope_scaling"] = rope
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def record_prompt(g, i, ids, out):
    """Prompt i's ids, logits and every hidden state (the embeddings first) from one forward."""
    g[f"prompt{i}.ids"] = ids[0].to(torch.int32)
    g[f"prompt{i}.logits"] = out.logits[0].float()
    g[f"prompt{i}.hidden"] = torch.stack([h[0] for h in out.hidden_states]).float()


@torch.no_grad()
def greedy_continuation(model):
    """transformers' greedy continuation of prompt 1: GREEDY_NEW tokens, no stop token."""
    prompt = torch.tensor([PROMPTS[1]])
    gen = model.generate(prompt, max_new_tokens=GREEDY_NEW, min_new_tokens=GREEDY_NEW,
                         do_sample=False, eos_token_id=None, pad_token_id=0)
    return gen[0, prompt.shape[1]:].to(torch.int32)


@torch.no_grad()
def target_goldens(model):
    g = {}
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt])
        record_prompt(g, i, ids, model(ids, output_hidden_states=True))
    g["greedy"] = greedy_continuation(model)
    return g


def make_draft(name, spec, target_cfg, out):
    tcfg = target_cfg.to_dict()
    cfg = {k: tcfg[k] for k in ("vocab_size", "hidden_size", "intermediate_size",
                                "num_attention_heads", "num_key_value_heads", "head_dim",
                                "rms_norm_eps", "max_position_embeddings", "rope_parameters",
                                "initializer_range")}
    cfg.update(spec.get("cfg", {}), num_hidden_layers=spec["layers"])
    config = Qwen3Config(**cfg)
    config.architectures = ["DFlashDraftModel"]
    config.num_target_layers = target_cfg.num_hidden_layers
    if "dflash_config" in spec:
        config.dflash_config = spec["dflash_config"]
    for k, v in spec.get("top_level", {}).items():
        setattr(config, k, v)
    model = DFlashDraftModel(config).eval()
    perturb_norms(model, torch.Generator().manual_seed(len(name)))
    model = model.to(spec.get("dtype", torch.float32))
    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path)
    return DFlashDraftModel.from_pretrained(path, dtype=torch.float32).eval()


@torch.no_grad()
def block_goldens(draft, target):
    """Draft block logits for one context: [anchor, MASK x (B-1)] after prompt 2."""
    g = {}
    ctx = torch.tensor([PROMPTS[2]])
    out = target(ctx, output_hidden_states=True)
    features = zlab.extract_context_feature(out.hidden_states, draft.target_layer_ids)
    B = draft.block_size
    anchor = int(out.logits[0, -1].argmax())
    block = torch.tensor([[anchor] + [draft.mask_token_id] * (B - 1)])
    n = ctx.shape[1]
    pos = torch.arange(n + B)[None]
    noise = zlab._raw_input_embeddings(target, block)
    hidden = draft(target_hidden=features, noise_embedding=noise, position_ids=pos)
    g["block.context"] = ctx[0].to(torch.int32)
    g["block.anchor"] = torch.tensor([anchor], dtype=torch.int32)
    g["block.logits"] = draft.compute_logits(hidden[0, 1:], zlab._output_head(target)).float()
    return g


@torch.no_grad()
def draft_goldens(draft, target):
    """Block logits, then z-lab's greedy speculative decoding end to end."""
    g = block_goldens(draft, target)
    # z-lab times cycles with torch.cuda.synchronize; on the CPU a plain clock does.
    zlab._cuda_time = time.perf_counter
    prompt = torch.tensor([PROMPTS[1]])
    res = zlab.dflash_generate(draft, target, prompt, max_new_tokens=SPEC_NEW, stop_token_ids=None,
                               temperature=0.0, return_stats=True)
    g["spec.output"] = res.output_ids[0, prompt.shape[1]:].to(torch.int32)
    g["spec.acceptance_lengths"] = torch.tensor(res.acceptance_lengths, dtype=torch.int32)
    return g


def parse_args(doc, goldens):
    """--out (fixtures) and --goldens (default `goldens`), both created; seeds torch's global RNG."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--goldens", default=goldens)
    args = ap.parse_args()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.goldens, exist_ok=True)
    return args


def new_manifest():
    return {"prompts": PROMPTS, "greedy_new": GREEDY_NEW, "spec_new": SPEC_NEW, "targets": {},
            "drafts": {}}


def target_entry(name, spec):
    return {"golden": f"{name}.safetensors", "dtype": str(spec["dtype"]).removeprefix("torch.")}


def save_drafts(drafts, targets, args, manifest, goldens=draft_goldens):
    """Makes each draft for its (already made) target and saves `goldens(draft, target)`."""
    for name, spec in drafts.items():
        target = targets[spec["target"]]
        draft = make_draft(name, spec, target.config, args.out)
        save_file(goldens(draft, target), os.path.join(args.goldens, f"{name}.safetensors"))
        manifest["drafts"][name] = {"golden": f"{name}.safetensors", "target": spec["target"],
                                    "block_size": draft.block_size}
        print(f"draft {name}: saved (target {spec['target']}, block {draft.block_size})", flush=True)


def write_manifest(manifest, path):
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def save_targets(targets, make_target, target_goldens, args, manifest):
    """Makes each target (seeded by its name's length) and saves its goldens; returns the models."""
    models = {}
    for name, spec in targets.items():
        model = make_target(name, spec, args.out, torch.Generator().manual_seed(len(name)))
        models[name] = model
        save_file(target_goldens(model), os.path.join(args.goldens, f"{name}.safetensors"))
        manifest["targets"][name] = target_entry(name, spec)
        if "legacy_copy" in spec:
            manifest["targets"][spec["legacy_copy"]] = {"golden": f"{name}.safetensors",
                                                        "dtype": "float32"}
        print(f"target {name}: saved", flush=True)
    return models


def main():
    args = parse_args(__doc__, "tests/goldens")
    manifest = new_manifest()
    targets = save_targets(TARGETS, make_target, target_goldens, args, manifest)
    save_drafts(DRAFTS, targets, args, manifest)
    write_manifest(manifest, os.path.join(args.goldens, "manifest.json"))


if __name__ == "__main__":
    main()
