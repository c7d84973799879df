"""Which config.json a random pair is made from, and its DFlash draft's config.

A target comes from (first match):
  a path             a config.json, or a directory holding one
  a registry name    data/pairs.json (the planner's registry, src/plan/registry.cc): its
                     committed config.json (tests/data/configs/) when it names one, else a config
                     built from the entry's recorded shape, with transformers' defaults for the
                     fields the shape does not record (said so in the written config's note)
  a legacy name      qwen3-0.6b / qwen3-1.7b, the shapes the first version of this tool knew

The draft is z-lab's DFlashDraftModel layout: the registry's committed draft config.json or its
draft shape where the pair has them, else the target's widths with 5 layers (z-lab's Qwen3 drafts).
"""
import copy
import json
import pathlib

from .layout import text_config

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
REGISTRY = ROOT / "data" / "pairs.json"
DRAFT_LAYERS = 5
QWEN3_VOCAB, QWEN3_MASK_TOKEN_ID = 151936, 151669  # z-lab's Qwen3 drafts' mask token

# The shapes of the first version of this tool (Qwen3-0.6B/1.7B config.json values).
LEGACY = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_attention_heads=16, tie_word_embeddings=True),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_attention_heads=16, tie_word_embeddings=True),
}


def _legacy_config(name):
    return dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=QWEN3_VOCAB,
                num_hidden_layers=28, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                rms_norm_eps=1e-6, rope_theta=1000000.0, bos_token_id=151643, eos_token_id=151645,
                **LEGACY[name])


def _registry():
    return {p["name"]: p for p in json.loads(REGISTRY.read_text())["pairs"]}


def _config_from_shape(shape):
    """config.json fields from a registry shape (field names as config.json spells them)."""
    arch = shape["architecture"]
    c = {k: shape[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                               "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")}
    c.update(rms_norm_eps=1e-6, max_position_embeddings=32768)
    if "moe" in shape:
        m = shape["moe"]
        c.update(num_experts=m["num_experts"], num_experts_per_tok=m["num_experts_per_tok"],
                 moe_intermediate_size=m["moe_intermediate_size"])
        if m.get("shared_expert_intermediate_size"):
            c["shared_expert_intermediate_size"] = m["shared_expert_intermediate_size"]
    if "linear_attention" in shape:
        la = shape["linear_attention"]
        interval = shape["num_hidden_layers"] // shape["full_attention_layers"]
        c.update(linear_num_key_heads=la["num_key_heads"], linear_num_value_heads=la["num_value_heads"],
                 linear_key_head_dim=la["key_head_dim"], linear_value_head_dim=la["value_head_dim"],
                 linear_conv_kernel_dim=la["conv_kernel"],
                 layer_types=["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                              for i in range(shape["num_hidden_layers"])],
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
    else:
        c["rope_theta"] = 1000000.0
    if arch.endswith("ForConditionalGeneration"):
        return {"architectures": [arch], "tie_word_embeddings": c["tie_word_embeddings"], "text_config": c}
    return {"architectures": [arch], **c}


def resolve_target(spec):
    """(config, note, registry entry or None) for a --config / --shape value."""
    path = pathlib.Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return json.loads(path.read_text()), f"shape from {spec}", None
    pairs = _registry()
    if spec in pairs:
        entry = pairs[spec]
        t = entry["target"]
        if t.get("config"):
            return json.loads((ROOT / t["config"]).read_text()), f"shape from {t['config']} ({t['id']})", entry
        return (_config_from_shape(t["shape"]), f"shape from data/pairs.json '{spec}' ({t['id']}, source "
                f"'{t.get('source')}'); fields outside that shape (rope, eps, context) are defaults, not "
                "the published values", entry)
    if spec in LEGACY:
        return _legacy_config(spec), f"shape of {spec} as the first version of make_random_pair.py had it", None
    raise SystemExit(f"--config {spec!r}: not a config.json, a directory with one, a data/pairs.json name "
                     f"({', '.join(sorted(pairs))}) or one of {', '.join(LEGACY)}")


def reduce_layers(config, n):
    """The first n layers, widths and expert counts kept (per-layer lists cut to match)."""
    config = copy.deepcopy(config)
    c = text_config(config)
    if not 1 <= n <= c["num_hidden_layers"]:
        raise SystemExit(f"--layers {n}: the model has {c['num_hidden_layers']} layers")
    c["num_hidden_layers"] = n
    if "layer_types" in c:
        c["layer_types"] = c["layer_types"][:n]
    if "mlp_only_layers" in c:
        c["mlp_only_layers"] = [i for i in c["mlp_only_layers"] if i < n]
    if "max_window_layers" in c:
        c["max_window_layers"] = min(c["max_window_layers"], n)
    return config


def capture_layers(num_target_layers, num_draft_layers):
    """z-lab's default target_layer_ids (build_target_layer_ids); spread evenly instead when
    the target is too shallow for that formula (under 5 layers)."""
    n, L = num_draft_layers, num_target_layers
    if n == 1:
        return [L // 2]
    ids = [round(1 + i * (L - 4) / (n - 1)) for i in range(n)]
    if L < 5 or len(set(ids)) < n:
        ids = sorted({round(i * (L - 1) / (n - 1)) for i in range(n)})
    return ids


def draft_config(target, entry, num_layers=None, block_size=16):
    """A DFlashDraftModel config.json for `target`: the registry entry's committed draft
    config.json when it names one, else built from the entry's draft shape or the target."""
    if entry and entry["draft"].get("config"):
        d = json.loads((ROOT / entry["draft"]["config"]).read_text())
        if num_layers:
            d["num_hidden_layers"] = num_layers
            d.pop("layer_types", None)
        return d
    t = text_config(target)
    shape = entry["draft"]["shape"] if entry else {}
    d = {k: shape.get(k) or t.get(k) for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                               "num_key_value_heads", "head_dim")}
    d["head_dim"] = d["head_dim"] or d["hidden_size"] // d["num_attention_heads"]
    n = num_layers or shape.get("num_hidden_layers") or DRAFT_LAYERS
    L = t["num_hidden_layers"]
    theta = t.get("rope_theta") or (t.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    vocab = t["vocab_size"]
    mask = QWEN3_MASK_TOKEN_ID if vocab == QWEN3_VOCAB else vocab - 1
    d.update(architectures=["DFlashDraftModel"], model_type="qwen3", num_hidden_layers=n, vocab_size=vocab,
             rms_norm_eps=t.get("rms_norm_eps", 1e-6), max_position_embeddings=t.get("max_position_embeddings", 32768),
             rope_parameters={"rope_type": "default", "rope_theta": theta}, attention_bias=False,
             tie_word_embeddings=False, block_size=shape.get("block_size", block_size), num_target_layers=L,
             layer_types=["full_attention"] * n,
             dflash_config={"target_layer_ids": capture_layers(L, n), "mask_token_id": mask})
    return d
