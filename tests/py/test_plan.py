"""`dflash plan` and `dflash doctor` as a user runs them: plan's JSON keeps the schema
docs/plan.md documents (keys and types), the Markdown labels its prediction as uncalibrated,
doctor reports on a fixture without loading it and fails clearly on a bad path; `plan --calibrate`
measures a tiny pair's costs on synthetic weights and predicts from them."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("DFLASH_BIN", str(ROOT / "build" / "bin" / "dflash"))
FIXTURES = ROOT / "tests" / "fixtures"


def dflash(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)


# docs/plan.md: the schema, as key -> type (dict: nested object; (type,): list of it;
# Nullable(x): x or null).
NUMBER = (int, float)


class Nullable:
    def __init__(self, schema):
        self.schema = schema


MEMORY = {"target_weights_bytes": int, "draft_weights_bytes": int, "kv_cache_bytes": int, "kv_bytes_per_1k": int,
          "draft_cache_bytes": int, "recurrent_state_bytes": int, "buffers_bytes": int, "total_bytes": int}
SCHEMA = {
    "schema": int,
    "machine": {"label": str, "cpu": str, "simd_target": str, "hardware_threads": int, "threads": int,
                "memory_gb": NUMBER, "memory_source": str, "bandwidth_gbs": NUMBER, "bandwidth_source": str,
                "f32_gmacs": NUMBER, "int8_gmacs": NUMBER},
    "request": {"context": int, "task": str, "pair": str},
    "registry": str,
    "candidates": ({"pair": str, "target": str, "draft": str, "format": str, "runs_today": bool, "why_not": str,
                    "verified": bool, "fits": bool, "memory": MEMORY},),
    "choice": {"pair": str, "format": str},
    "reason": str,
    "commands": {"setup": (str,), "run": str, "bench": str},
    "prediction": {"label": str, "plain_tok_s": NUMBER, "dflash_tok_s": NUMBER, "dflash_full_block_tok_s": NUMBER,
                   "speedup": NUMBER, "verify_rows": int, "per_depth_acceptance": NUMBER, "tau": NUMBER,
                   "tau_source": str, "step_ms": NUMBER, "draft_ms": NUMBER, "verify_slope": NUMBER,
                   "pick_ms": NUMBER, "append_ms": NUMBER,
                   "ttft_ms": Nullable(NUMBER), "assumptions": (str,)},
    "calibration": Nullable({"format": str, "format_note": str, "kv_type": str, "context": int,
                             "target_layers_built": int, "target_layers": int, "draft_layers_built": int,
                             "draft_layers": int, "extrapolated": bool, "rows": (int,), "verify_ms": (NUMBER,),
                             "lm_head_share": (NUMBER,), "draft_ms": NUMBER, "pick_ms": NUMBER, "append_ms": NUMBER,
                             "sustained_factor": NUMBER, "cycle_factor": NUMBER, "prefill_tok_s": NUMBER,
                             "ttft_ms": NUMBER, "build_s": NUMBER, "measure_s": NUMBER}),
    "recommendation": {"dflash": bool, "verify_rows": int, "format": str, "draft_window": str, "why": str},
}


def check(value, schema, where):
    if isinstance(schema, Nullable):
        if value is not None:
            check(value, schema.schema, where)
    elif isinstance(schema, dict):
        assert isinstance(value, dict), where
        assert set(value) == set(schema), f"{where}: keys {sorted(value)} != {sorted(schema)}"
        for key, sub in schema.items():
            check(value[key], sub, f"{where}.{key}")
    elif isinstance(schema, tuple) and schema and not isinstance(schema[0], type):
        assert isinstance(value, list) and value, where
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    elif isinstance(schema, tuple) and len(schema) == 1:
        assert isinstance(value, list) and value and all(isinstance(v, schema[0]) for v in value), where
    else:
        assert isinstance(value, schema) and not (schema is int and isinstance(value, bool)), f"{where}: {value!r}"


def plan_json(*args):
    res = dflash("plan", "--format", "json", "--bandwidth-gbs", "40", *args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_plan_json_schema_is_stable():
    j = plan_json("--memory-gb", "32", "--context", "8192", "--task", "code", "--machine-label", "ci")
    check(j, SCHEMA, "plan")
    assert j["schema"] == 1 and j["machine"]["memory_source"] == "--memory-gb"
    assert j["choice"] == {"pair": "qwen3-8b", "format": "q8_0"}
    assert j["prediction"]["label"] == "uncalibrated (analytic)"
    assert j["prediction"]["tau"] == 5.84
    assert j["calibration"] is None and j["prediction"]["ttft_ms"] is None


def tiny_registry(tmp_path):
    """data/pairs.json with one pair of the shipped toy pair's shapes (models/dflash-pair)."""
    registry = json.loads((ROOT / "data" / "pairs.json").read_text())
    pair = copy.deepcopy(next(p for p in registry["pairs"] if p["name"] == "qwen3-4b"))
    pair["name"] = "toy"
    pair["target"].update(id="toy/target", verified=False, params_b=0.007, note="test shape")
    pair["target"].pop("config", None)
    pair["target"]["shape"].update(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=64, vocab_size=4096)
    pair["draft"].update(id="toy/draft")
    pair["draft"]["shape"].update(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=64, capture_layers=2)
    registry["pairs"] = [pair]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(registry))
    return path


def test_plan_calibrate_on_a_tiny_shape(tmp_path):
    j = plan_json("--registry", tiny_registry(tmp_path), "--memory-gb", "8", "--context", "512", "-t", "1",
                  "--calibrate", "--calibrate-layers", "2", "--calibrate-draft-layers", "1", "--calibrate-repeats", "2")
    check(j, SCHEMA, "plan")
    c = j["calibration"]
    assert j["choice"] == {"pair": "toy", "format": "q8_0"} and c["format"] == "q8_0"
    assert (c["target_layers_built"], c["target_layers"], c["draft_layers_built"], c["draft_layers"]) == (2, 8, 1, 2)
    assert c["extrapolated"] and c["context"] == 512 and c["rows"] == [1, 2, 4, 8, 16]
    # Only structure here: which row count costs more is a timing, and a test on a shared machine
    # cannot rely on one (a preempted 1-row pass timed above the 16-row one in CI).
    assert all(ms > 0 for ms in c["verify_ms"])
    assert all(0 <= s < 1 for s in c["lm_head_share"])
    assert c["draft_ms"] > 0 and c["prefill_tok_s"] > 0 and c["ttft_ms"] > 0
    p = j["prediction"]
    assert p["label"] == "calibrated (measured on this machine)"
    # The prediction is the cost model's on the calibrated costs.
    assert p["step_ms"] == c["verify_ms"][0] and p["draft_ms"] == c["draft_ms"] and p["ttft_ms"] == c["ttft_ms"]
    assert p["pick_ms"] == c["pick_ms"] > 0 and p["append_ms"] == c["append_ms"] > 0
    assert c["sustained_factor"] > 0 and c["cycle_factor"] > 0
    # A plain step: the 1-row pass plus the loop's pick and draft-context append.
    assert abs(p["plain_tok_s"] - 1e3 / (c["verify_ms"][0] + c["pick_ms"] + c["append_ms"])) < 1e-9
    assert any("extrapolated per layer" in a for a in p["assumptions"])
    assert j["recommendation"]["dflash"] == (p["verify_rows"] > 1 and p["speedup"] >= 1.1)


def test_plan_calibrate_markdown_says_it_measured(tmp_path):
    res = dflash("plan", "--registry", tiny_registry(tmp_path), "--bandwidth-gbs", "40", "--memory-gb", "8",
                 "--context", "256", "-t", "1", "--calibrate", "--calibrate-repeats", "1")
    assert res.returncode == 0, res.stderr
    assert "## Prediction: calibrated (measured on this machine)" in res.stdout
    assert "built 2 of the target's 8 layers and 2 of the draft's 2" in res.stdout
    assert "## Recommendation" in res.stdout and "- draft window: " in res.stdout


def test_plan_json_when_nothing_fits_keeps_the_keys():
    j = plan_json("--memory-gb", "2")
    assert j["choice"] is None and j["commands"] is None and j["prediction"] is None
    assert j["calibration"] is None and j["recommendation"] is None
    assert "no pair" in j["reason"]
    check({k: v for k, v in j.items() if v is not None}, {k: v for k, v in SCHEMA.items() if j[k] is not None}, "plan")


def test_plan_markdown_labels_the_prediction_and_writes_the_output(tmp_path):
    out = tmp_path / "plan.md"
    res = dflash("plan", "--bandwidth-gbs", "40", "--memory-gb", "16", "--pair", "qwen3-4b", "--output", out)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "## Prediction: uncalibrated (analytic)" in text
    assert "hf download Qwen/Qwen3-4B --local-dir models/Qwen3-4B" in text
    assert "dflash bench -m models/Qwen3-4B -d models/Qwen3-4B-DFlash-b16" in text


def test_plan_bad_flags_are_clear_errors():
    res = dflash("plan", "--bandwidth-gbs", "40", "--pair", "qwen9")
    assert res.returncode == 1 and "--pair 'qwen9' is not in the registry" in res.stderr
    res = dflash("plan", "--bandwidth-gbs", "40", "--task", "poetry")
    assert res.returncode == 1 and "--task" in res.stderr
    res = dflash("plan", "--registry", "/nonexistent/pairs.json")
    assert res.returncode == 1 and "/nonexistent/pairs.json" in res.stderr


def test_doctor_on_a_fixture_pair():
    res = dflash("doctor", "-m", FIXTURES / "qwen3-tiny", "-d", FIXTURES / "dflash-tiny", "-c", "1024", "-t", "1")
    assert res.returncode == 0, res.stderr
    assert "architecture 'Qwen3ForCausalLM'" in res.stdout
    assert "matches the target: yes" in res.stdout
    # 4 layers x 2 kv heads x 16 x K and V x 2 bytes x 1024 positions = 0.5 MiB
    assert "KV cache: 0.5 MiB" in res.stdout
    assert "verdict: will load" in res.stdout


def test_doctor_on_a_bad_path_is_a_clear_error():
    res = dflash("doctor", "-m", "/nonexistent/model")
    assert res.returncode == 1
    assert "/nonexistent/model: not found" in res.stderr


def test_doctor_on_an_unsupported_architecture(tmp_path):
    config = json.loads((FIXTURES / "qwen3-tiny" / "config.json").read_text())
    config["architectures"] = ["Qwen3NextForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes((FIXTURES / "qwen3-tiny" / "model.safetensors").read_bytes())
    res = dflash("doctor", "-m", tmp_path, "-t", "1")
    assert res.returncode == 1
    assert "not supported as a target" in res.stdout and "verdict: will not load" in res.stdout


def test_doctor_on_a_hybrid_fixture_counts_only_full_attention_kv():
    res = dflash("doctor", "-m", FIXTURES / "qwen35-tiny", "-d", FIXTURES / "dflash-qwen35", "-c", "1024", "-t", "1")
    assert res.returncode == 0, res.stderr
    assert "architecture 'Qwen3_5ForCausalLM'" in res.stdout
    assert "matches the target: yes" in res.stdout
    # One full-attention layer of four: 1 x 2 kv heads x 16 x K and V x 2 bytes x 1024 = 0.125 MiB
    # (all four would be 0.5); three Gated DeltaNet layers hold (4 x 16 x 8 + 96 x 3) f32 each.
    assert "KV cache: 0.1 MiB" in res.stdout
    assert "recurrent state: 0.01 MiB (3 linear-attention layers)" in res.stdout
    assert "verdict: will load" in res.stdout


def test_doctor_on_a_moe_fixture():
    res = dflash("doctor", "-m", FIXTURES / "qwen3moe-tiny", "-d", FIXTURES / "dflash-moe-tiny", "-c", "1024", "-t", "1")
    assert res.returncode == 0, res.stderr
    assert "architecture 'Qwen3MoeForCausalLM'" in res.stdout
    assert "matches the target: yes" in res.stdout
    assert "KV cache: 0.2 MiB" in res.stdout  # 3 layers x 1 kv head x 16 x 2 x 2 bytes x 1024
    assert "verdict: will load" in res.stdout


GGUF = ROOT / "tests" / "goldens" / "gguf"


def test_doctor_on_a_gguf_sizes_memory_from_its_metadata():
    res = dflash("doctor", "-m", GGUF / "qwen3-tiny.gguf", "-c", "1024", "-t", "1")
    assert res.returncode == 0, res.stderr
    assert "format: GGUF, architecture 'qwen3'" in res.stdout
    assert "draft: none given" in res.stdout
    # 4 layers x 2 kv heads x 16 x K and V x 2 bytes x 1024, from qwen3.* metadata
    assert "memory at context 1024" in res.stdout and "KV cache: 0.5 MiB" in res.stdout
    assert "verdict: will load" in res.stdout


def test_doctor_on_a_gguf_draft_checks_it_against_the_target():
    res = dflash("doctor", "-m", FIXTURES / "qwen3-tiny", "-d", GGUF / "dflash-tiny.dflash.gguf", "-c", "1024", "-t", "1")
    assert res.returncode == 0, res.stderr
    assert "format: GGUF, architecture 'dflash'" in res.stdout
    assert "matches the target: yes" in res.stdout and "draft context cache: 0.3 MiB" in res.stdout
    assert "verdict: will load" in res.stdout


def test_doctor_on_an_unsupported_gguf_says_why(tmp_path):
    # A draft GGUF offered as the target: the loader's own message, and no crash.
    res = dflash("doctor", "-m", GGUF / "dflash-tiny.dflash.gguf", "-t", "1")
    assert res.returncode == 1
    assert "is not supported as a target" in res.stdout and "verdict: will not load" in res.stdout


def test_doctor_reads_headers_not_weights(tmp_path):
    # A checkpoint declaring 4 GiB of weights in a sparse file: doctor sizes it from the header
    # and stays far below that in memory (its bandwidth probe alone takes 256 MiB).
    config = json.loads((FIXTURES / "qwen3-tiny" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    n = 4 << 30
    header = json.dumps({"model.big.weight": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(tmp_path / "model.safetensors", "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + n)
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(r.stdout)")
    res = subprocess.run([sys.executable, "-c", probe, BIN, "doctor", "-m", tmp_path, "-t", "1"], capture_output=True,
                         text=True, timeout=300)
    peak_kib = int(res.stdout.split("\n", 1)[0])
    assert "4096.0 MiB" in res.stdout, res.stdout
    assert peak_kib < 1 << 20, f"doctor peaked at {peak_kib} KiB for a 4 GiB checkpoint"
