"""The tensors a checkpoint of each architecture holds, from its config.json alone.

Names, shapes and order follow what transformers 5.15 (targets) and z-lab's dflash 0.1.0
(DFlashDraftModel) write with save_pretrained; tests/goldens/layouts/*.json are those libraries'
own listings for tiny configs (tools/make_layout_listings.py) and tests/py/test_random_pair.py
holds this module to them. Vision towers and MTP heads of Qwen3.5 checkpoints are not written:
the engine reads the text model only.

Each tensor says how to fill it (`fill`), so random values keep activations finite:
  "matrix"    normal * initializer_range (0.02 in every published config)
  "norm"      1 + small noise: RMSNorm weights that multiply (x * w)
  "norm_1p"   small noise around 0: Qwen3.5's (1 + w) RMSNorms, whose stored weight starts at 0
  "a_log"     log(uniform(1, 16)): decay rates as transformers initialises A_log (without the
              uniform's 0, whose log is -inf)
  "dt_bias"   1 + small noise (transformers initialises it to 1)
"""
from dataclasses import dataclass

TEXT_ARCHS = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3_5ForCausalLM",
              "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
              "Qwen3_5MoeForConditionalGeneration")
DRAFT_ARCH = "DFlashDraftModel"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple
    fill: str


def text_config(config):
    """The decoder's fields: nested under text_config in ForConditionalGeneration configs."""
    return config.get("text_config", config)


def architecture(config):
    archs = config.get("architectures") or []
    if len(archs) != 1:
        raise ValueError(f"config.json 'architectures' should name one architecture, not {archs!r}")
    if archs[0] not in TEXT_ARCHS + (DRAFT_ARCH,):
        raise ValueError(f"architecture {archs[0]!r} is not supported "
                         f"(supported: {', '.join(TEXT_ARCHS + (DRAFT_ARCH,))})")
    return archs[0]


def _head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def _linear(name, out_features, in_features, bias=False):
    yield TensorSpec(name + ".weight", (out_features, in_features), "matrix")
    if bias:
        yield TensorSpec(name + ".bias", (out_features,), "matrix")


def _attention(p, c, gated):
    """Qwen3 attention; Qwen3.5's full-attention layers also project a sigmoid output gate, so
    q_proj is twice as tall, and their q/k norms are (1 + w)."""
    d, h, nh, nkv = _head_dim(c), c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    bias = c.get("attention_bias", False)
    yield from _linear(p + "self_attn.q_proj", nh * d * (2 if gated else 1), h, bias)
    yield from _linear(p + "self_attn.k_proj", nkv * d, h, bias)
    yield from _linear(p + "self_attn.v_proj", nkv * d, h, bias)
    yield from _linear(p + "self_attn.o_proj", h, nh * d, bias)
    norm = "norm_1p" if gated else "norm"
    yield TensorSpec(p + "self_attn.q_norm.weight", (d,), norm)
    yield TensorSpec(p + "self_attn.k_norm.weight", (d,), norm)


def _gated_deltanet(p, c):
    """Qwen3.5's linear-attention layer (transformers' Qwen3_5GatedDeltaNet)."""
    h = c["hidden_size"]
    nk, nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    key_dim, value_dim = nk * c["linear_key_head_dim"], nv * c["linear_value_head_dim"]
    conv_dim = 2 * key_dim + value_dim
    q = p + "linear_attn."
    yield TensorSpec(q + "A_log", (nv,), "a_log")
    yield TensorSpec(q + "conv1d.weight", (conv_dim, 1, c["linear_conv_kernel_dim"]), "matrix")
    yield TensorSpec(q + "dt_bias", (nv,), "dt_bias")
    yield from _linear(q + "in_proj_a", nv, h)
    yield from _linear(q + "in_proj_b", nv, h)
    yield from _linear(q + "in_proj_qkv", conv_dim, h)
    yield from _linear(q + "in_proj_z", value_dim, h)
    yield TensorSpec(q + "norm.weight", (c["linear_value_head_dim"],), "norm")  # gated norm: plain w
    yield from _linear(q + "out_proj", h, value_dim)


def _mlp(p, hidden, intermediate):
    yield from _linear(p + "down_proj", hidden, intermediate)
    yield from _linear(p + "gate_proj", intermediate, hidden)
    yield from _linear(p + "up_proj", intermediate, hidden)


def _num_experts(c):
    """Published configs say num_experts; transformers 5 saves it as num_local_experts."""
    return c.get("num_experts", c.get("num_local_experts", 0))


def _is_moe_layer(c, i):
    """transformers' rule (Qwen3Moe): experts unless listed in mlp_only_layers or off the
    decoder_sparse_step grid; Qwen3.5-MoE configs have neither field (every layer)."""
    if _num_experts(c) <= 0 or i in c.get("mlp_only_layers", []):
        return False
    return (i + 1) % c.get("decoder_sparse_step", 1) == 0


def _moe(p, c):
    h, e = c["hidden_size"], _num_experts(c)
    for j in range(e):
        yield from _mlp(f"{p}mlp.experts.{j}.", h, c["moe_intermediate_size"])
    yield from _linear(p + "mlp.gate", e, h)
    shared = c.get("shared_expert_intermediate_size", 0)
    if shared:
        yield from _mlp(p + "mlp.shared_expert.", h, shared)
        yield from _linear(p + "mlp.shared_expert_gate", 1, h)


def _decoder_layer(p, c, layer_type, hybrid):
    """One decoder layer; `hybrid` marks the Qwen3.5 family ((1 + w) norms, gated attention)."""
    norm = "norm_1p" if hybrid else "norm"
    yield TensorSpec(p + "input_layernorm.weight", (c["hidden_size"],), norm)
    if layer_type == "linear_attention":
        yield from _gated_deltanet(p, c)
    elif layer_type == "full_attention":
        yield from _attention(p, c, gated=hybrid)
    else:
        raise ValueError(f"layer type {layer_type!r} is not supported")


def target_tensors(config):
    """Every tensor of a target checkpoint, in a fixed order (per layer, sorted by name as
    save_pretrained's listing sorts them, embeddings first)."""
    arch = architecture(config)
    if arch == DRAFT_ARCH:
        raise ValueError("a DFlashDraftModel config is a draft, not a target")
    c = text_config(config)
    hybrid = arch.startswith("Qwen3_5")
    n = c["num_hidden_layers"]
    types = c.get("layer_types") if hybrid else None
    if hybrid and (types is None or len(types) != n):
        raise ValueError(f"layer_types needs {n} entries (one per layer), has {len(types or [])}")
    prefix = "model.language_model." if arch.endswith("ForConditionalGeneration") else "model."
    h = c["hidden_size"]
    out = [TensorSpec(prefix + "embed_tokens.weight", (c["vocab_size"], h), "matrix")]
    for i in range(n):
        p = f"{prefix}layers.{i}."
        layer = list(_decoder_layer(p, c, types[i] if hybrid else "full_attention", hybrid))
        layer += list(_moe(p, c) if _is_moe_layer(c, i) else _mlp(p + "mlp.", h, c["intermediate_size"]))
        layer.append(TensorSpec(p + "post_attention_layernorm.weight", (h,), "norm_1p" if hybrid else "norm"))
        out += sorted(layer, key=lambda t: t.name)
    out.append(TensorSpec(prefix + "norm.weight", (h,), "norm_1p" if hybrid else "norm"))
    if not config.get("tie_word_embeddings", c.get("tie_word_embeddings", False)):
        out.append(TensorSpec("lm_head.weight", (c["vocab_size"], h), "matrix"))
    return out


def draft_tensors(config):
    """A z-lab DFlashDraftModel: fc over the concatenated target features, hidden_norm, Qwen3
    decoder layers and the final norm; no embeddings or LM head (the target's are used)."""
    if architecture(config) != DRAFT_ARCH:
        raise ValueError(f"not a {DRAFT_ARCH} config")
    h = config["hidden_size"]
    n_features = len(config["dflash_config"]["target_layer_ids"])
    out = [TensorSpec("fc.weight", (h, n_features * h), "matrix"),
           TensorSpec("hidden_norm.weight", (h,), "norm")]
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        layer = list(_decoder_layer(p, config, "full_attention", hybrid=False))
        layer += list(_mlp(p + "mlp.", h, config["intermediate_size"]))
        layer.append(TensorSpec(p + "post_attention_layernorm.weight", (h,), "norm"))
        out += sorted(layer, key=lambda t: t.name)
    out.append(TensorSpec("norm.weight", (h,), "norm"))
    return out
