"""tools/make_random_pair.py: the streaming random-weight generator (numpy only).

The layouts are held to what the reference libraries save: tests/goldens/layouts/*.json are
transformers' (and z-lab's, for the draft) own save_pretrained listings for tiny configs
(tools/make_layout_listings.py). The generator is run on those same config.json files and the
safetensors it writes are read back here, header and values. A tiny dense pair is loaded and run
by the engine; arches the engine cannot load yet are checked by listing only."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
LAYOUTS = ROOT / "tests" / "goldens" / "layouts"
BIN = os.environ.get("DFLASH_BIN", str(ROOT / "build" / "bin" / "dflash"))
sys.path.insert(0, str(TOOLS))

from random_weights import configs, layout, writer  # noqa: E402

TARGET_LISTINGS = sorted(p.stem for p in LAYOUTS.glob("*.json") if p.stem != "dflash-draft")


def listing(name):
    return json.loads((LAYOUTS / f"{name}.json").read_text())


def make_pair(config, out, *extra):
    """Runs the tool on a config.json written to `out`; returns the completed process."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "input.json").write_text(json.dumps(config))
    return subprocess.run([sys.executable, str(TOOLS / "make_random_pair.py"), "--config", str(out / "input.json"),
                           "--out", str(out), *map(str, extra)], capture_output=True, text=True, timeout=600)


def read_checkpoint(model_dir):
    """{name: (dtype, shape, bf16 values as float32)} from every safetensors file in model_dir,
    checking each file's byte ranges tile its data exactly."""
    tensors = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        header.pop("__metadata__", None)
        data = raw[8 + n:]
        ranges = sorted(h["data_offsets"] for h in header.values())
        assert ranges[0][0] == 0 and ranges[-1][1] == len(data), path
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), path
        for name, h in header.items():
            a, b = h["data_offsets"]
            bits = np.frombuffer(data[a:b], dtype=np.uint16).astype(np.uint32) << 16
            tensors[name] = (h["dtype"], h["shape"], bits.view(np.float32).reshape(h["shape"]))
    return tensors


@pytest.mark.parametrize("name", TARGET_LISTINGS)
def test_target_layout_is_what_transformers_saves(name, tmp_path):
    want = listing(name)
    specs = layout.target_tensors(want["config"])
    assert sorted([s.name, list(s.shape), "BF16"] for s in specs) == want["tensors"]
    r = make_pair(want["config"], tmp_path, "--no-draft")
    assert r.returncode == 0, r.stderr
    got = read_checkpoint(tmp_path / "target")
    assert sorted([k, v[1], v[0]] for k, v in got.items()) == want["tensors"]
    written = json.loads((tmp_path / "target" / "config.json").read_text())
    assert "random weights" in written.pop("note")
    assert written == want["config"]


def test_draft_layout_is_what_zlab_saves(tmp_path):
    want = listing("dflash-draft")
    specs = layout.draft_tensors(want["config"])
    assert sorted([s.name, list(s.shape), "BF16"] for s in specs) == want["tensors"]
    writer.write_checkpoint(tmp_path, specs, seed=0)
    assert sorted([k, v[1], v[0]] for k, v in read_checkpoint(tmp_path).items()) == want["tensors"]


def test_values_are_small_and_norms_sensible(tmp_path):
    """Matrices ~N(0, 0.02); plain norms near 1; Qwen3.5's (1 + w) norms near 0; A_log in
    [0, log 16]; dt_bias near 1; all finite."""
    config = listing("qwen3_5-causal-lm")["config"]
    specs = layout.target_tensors(config)
    writer.write_checkpoint(tmp_path, specs, seed=3)
    got = read_checkpoint(tmp_path)
    by_fill = {}
    for s in specs:
        values = got[s.name][2]
        assert np.isfinite(values).all(), s.name
        by_fill.setdefault(s.fill, []).append(values.ravel())
    v = {fill: np.concatenate(parts) for fill, parts in by_fill.items()}
    assert abs(v["matrix"].std() - 0.02) < 0.002 and abs(v["matrix"].mean()) < 0.002
    assert abs(v["norm"].mean() - 1) < 0.02 and v["norm"].std() < 0.05
    assert abs(v["norm_1p"].mean()) < 0.02 and 0 < v["norm_1p"].std() < 0.05
    assert v["a_log"].min() >= 0 and v["a_log"].max() <= np.log(16) + 0.01 and v["a_log"].std() > 0.1
    assert abs(v["dt_bias"].mean() - 1) < 0.1
    fills = {s.name: s.fill for s in specs}
    assert fills["model.layers.0.input_layernorm.weight"] == "norm_1p"
    assert fills["model.layers.0.linear_attn.norm.weight"] == "norm"  # the gated norm: plain w
    assert fills["model.layers.1.self_attn.q_norm.weight"] == "norm_1p" and fills["model.norm.weight"] == "norm_1p"
    assert fills["model.layers.0.linear_attn.A_log"] == "a_log"


def test_shards_index_and_layer_reduction_keep_values(tmp_path):
    """Shards under --shard-gb with HF's index; --layers keeps the kept tensors' exact values."""
    config = listing("qwen3-untied-bias")["config"]
    r = make_pair(config, tmp_path / "full", "--no-draft", "--shard-gb", 2e-5)  # ~21 KB shards
    assert r.returncode == 0, r.stderr
    full_dir = tmp_path / "full" / "target"
    index = json.loads((full_dir / "model.safetensors.index.json").read_text())
    shards = sorted(full_dir.glob("model-*-of-*.safetensors"))
    assert len(shards) > 2 and not (full_dir / "model.safetensors").exists()
    assert sorted({full_dir / f for f in index["weight_map"].values()}) == shards
    full = read_checkpoint(full_dir)
    assert set(index["weight_map"]) == set(full)
    assert index["metadata"]["total_size"] == sum(v[2].size * 2 for v in full.values())

    r = make_pair(config, tmp_path / "one", "--no-draft", "--layers", 1)
    assert r.returncode == 0, r.stderr
    one = read_checkpoint(tmp_path / "one" / "target")
    assert json.loads((tmp_path / "one" / "target" / "config.json").read_text())["num_hidden_layers"] == 1
    assert not any(".layers.1." in k for k in one)
    for name, (_, _, values) in one.items():
        np.testing.assert_array_equal(values, full[name][2], err_msg=name)


def test_peak_memory_is_a_chunk_not_a_tensor(tmp_path):
    """Qwen3-0.6B's 311 MB embedding (and one layer): the writer's peak RSS stays far below it.
    Measured in a fresh parent so no other child of this test session counts."""
    tool = [sys.executable, str(TOOLS / "make_random_pair.py"), "--shape", "qwen3-0.6b", "--layers", "1",
            "--no-draft", "--out", str(tmp_path)]
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stderr=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", probe, *tool], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    embed = (tmp_path / "target" / "model.safetensors").stat().st_size
    assert embed > 300e6
    peak = int(r.stdout) * 1024  # Linux: KiB
    assert peak < 150e6, f"peak RSS {peak / 1e6:.0f} MB for a {embed / 1e6:.0f} MB file"


def test_registry_shapes():
    """Registry names resolve to their committed config.json, or to a config built from the
    recorded shape (Qwen3.5: 3 linear-attention layers per full one)."""
    cfg, note, entry = configs.resolve_target("qwen3-8b")
    assert cfg == json.loads((ROOT / "tests/data/configs/Qwen--Qwen3-8B/config.json").read_text())
    assert entry["draft"]["id"] == "z-lab/Qwen3-8B-DFlash-b16"
    cfg, note, entry = configs.resolve_target("qwen3.5-9b")
    shape = entry["target"]["shape"]
    t = cfg["text_config"]
    assert t["layer_types"].count("full_attention") == shape["full_attention_layers"]
    assert t["layer_types"][3] == "full_attention" and t["layer_types"][0] == "linear_attention"
    specs = {s.name: s.shape for s in layout.target_tensors(cfg)}
    la = shape["linear_attention"]
    assert specs["model.language_model.layers.0.linear_attn.in_proj_qkv.weight"] == (
        2 * la["num_key_heads"] * la["key_head_dim"] + la["num_value_heads"] * la["value_head_dim"], shape["hidden_size"])
    assert specs["model.language_model.layers.3.self_attn.q_proj.weight"] == (
        2 * shape["num_attention_heads"] * shape["head_dim"], shape["hidden_size"])
    draft = configs.draft_config(cfg, entry)
    assert draft["num_hidden_layers"] == entry["draft"]["shape"]["num_hidden_layers"]
    assert draft["dflash_config"]["target_layer_ids"] == [1, 8, 15, 22, 29]  # z-lab's rule for 32 layers
    published = {"draft": {"config": "tests/fixtures/dflash-sliding/config.json"}}  # as a committed draft config
    assert configs.draft_config(cfg, published) == json.loads((ROOT / published["draft"]["config"]).read_text())
    two = layout.draft_tensors(configs.draft_config(cfg, published, num_layers=2))
    assert sum(s.name.endswith("input_layernorm.weight") for s in two) == 2
    cfg, _, entry = configs.resolve_target("qwen3-coder-30b-a3b")
    names = [s.name for s in layout.target_tensors(cfg)]
    assert sum(".mlp.experts." in n and n.endswith("down_proj.weight") for n in names) == 48 * 128
    with pytest.raises(SystemExit):
        configs.resolve_target("gpt-oss-20b-typo")
    with pytest.raises(ValueError):
        layout.target_tensors(configs._config_from_shape(configs._registry()["gpt-oss-20b"]["target"]["shape"]))


def test_tiny_dense_pair_runs_in_the_engine(tmp_path):
    """A generated Qwen3 pair loads, and DFlash greedy equals plain greedy (--compare)."""
    config = listing("qwen3-tied")["config"]
    r = make_pair(config, tmp_path, "--draft-layers", 2)
    assert r.returncode == 0, r.stderr
    draft = json.loads((tmp_path / "draft" / "config.json").read_text())
    assert draft["dflash_config"]["target_layer_ids"] == [0, 1]
    run = subprocess.run([BIN, "generate", "-m", tmp_path / "target", "-d", tmp_path / "draft", "--prompt-ids",
                          "1,2,3", "-n", "8", "--compare", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["identical"] is True and report["dflash"]["tokens"] == report["plain"]["tokens"]
    assert report["dflash"]["completion_tokens"] == 8 and report["dflash"]["verified_rows"] > 0
