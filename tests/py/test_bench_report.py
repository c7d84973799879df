"""`dflash bench --report` and `--acceptance` on the shipped pair, as a user runs them: the report
has its four sections, its JSON the schema docs/plan.md documents, its SVG charts parse as SVG;
scripted acceptance keeps the output identical to plain decoding, says it was scripted in the
printout and the JSON, and follows the profile (all accepted: tau = the block; none: tau = 1)."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("DFLASH_BIN", str(ROOT / "build" / "bin" / "dflash"))
PAIR = ROOT / "models" / "dflash-pair"
NUMBER = (int, float)


def bench(tmp_path, *args, prompts=2, new_tokens=40):
    lines = (ROOT / "bench" / "prompts" / "pair-heldout.jsonl").read_text().splitlines()[:prompts]
    (tmp_path / "prompts.jsonl").write_text("\n".join(lines) + "\n")
    cmd = [BIN, "bench", "-m", PAIR / "target", "-d", PAIR / "draft", "--prompts", tmp_path / "prompts.jsonl",
           "-n", str(new_tokens), "--warmup", "0", "--repeats", "1", "-t", "1", *args]
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return res.stdout


# docs/plan.md, "bench --report JSON": key -> type; dict: nested object; [x]: list of x.
REPORT_SCHEMA = {
    "schema": int,
    "machine": dict,
    "config": {"model": str, "draft": str, "target_quant": str, "kv_type": str, "spec_policy": str, "new_tokens": int,
               "block_size": int, "context": int, "warmup": int, "repeats": int},
    "acceptance": str,
    "acceptance_source": str,
    "throughput": {"plain_decode_tok_s": NUMBER, "dflash_decode_tok_s": NUMBER, "speedup": NUMBER,
                   "plain_ttft_ms": NUMBER, "dflash_ttft_ms": NUMBER, "tau": NUMBER, "accept_hist": [int],
                   "accept_at_depth": [NUMBER], "identical": bool,
                   "prompts": [{"name": str, "prompt_tokens": int, "plain_decode_tok_s": NUMBER,
                                "dflash_decode_tok_s": NUMBER, "speedup": NUMBER, "plain_ttft_ms": NUMBER,
                                "dflash_ttft_ms": NUMBER, "tau": NUMBER, "identical": bool}]},
    "memory": {"peak_rss_mib": NUMBER, "cache_bytes": int,
               "estimate": {"target_weights_bytes": int, "draft_weights_bytes": int, "kv_cache_bytes": int,
                            "draft_cache_bytes": int, "recurrent_state_bytes": int, "buffers_bytes": int,
                            "load_files_bytes": int, "total_bytes": int},
               "estimate_error": NUMBER},
    "cost_model": {"curve_context": int, "verify_cost": [{"rows": int, "ratio": NUMBER, "model_ratio": NUMBER}],
                   "step_ms": NUMBER, "draft_ms": NUMBER, "verify_slope": NUMBER, "pick_ms": NUMBER,
                   "append_ms": NUMBER, "sustained_factor": NUMBER, "predicted_plain_tok_s": NUMBER,
                   "predicted_dflash_tok_s": NUMBER, "predicted_adaptive_tok_s": NUMBER,
                   "predicted_full_block_tok_s": NUMBER, "plain_error": NUMBER, "dflash_error": NUMBER},
    "recommendation": {"dflash": bool, "verify_rows": int, "policy": str, "why": str},
}


def check(value, schema, where):
    if isinstance(schema, dict):
        assert isinstance(value, dict), where
        assert set(value) == set(schema), f"{where}: keys {sorted(value)} != {sorted(schema)}"
        for key, sub in schema.items():
            check(value[key], sub, f"{where}.{key}")
    elif isinstance(schema, list):
        assert isinstance(value, list) and value, where
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    else:
        assert isinstance(value, schema) and not (schema is int and isinstance(value, bool)), f"{where}: {value!r}"


def test_report_has_its_sections_schema_and_charts(tmp_path):
    out = bench(tmp_path, "--report", tmp_path / "report.md", "--json", tmp_path / "report.json")
    md = (tmp_path / "report.md").read_text()
    for section in ("## Throughput", "## Memory", "## Baseline comparison", "## Recommendation"):
        assert section in md, section
    assert "acceptance: **measured (the draft's own proposals)**" in md
    j = json.loads((tmp_path / "report.json").read_text())
    check(j, REPORT_SCHEMA, "report")
    assert j["schema"] == 1 and j["throughput"]["identical"] is True
    assert [p["name"] for p in j["throughput"]["prompts"]] == ["heldout00", "heldout01"]
    assert j["cost_model"]["verify_cost"][0]["rows"] == 1 and j["cost_model"]["verify_cost"][-1]["rows"] == 16
    assert j["memory"]["peak_rss_mib"] > 0
    for chart in ("cost", "acceptance", "throughput"):
        path = tmp_path / f"report-{chart}.svg"
        assert f"wrote {path}" in out
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
        assert f"](report-{chart}.svg)" in md
    bars = ET.parse(tmp_path / "report-throughput.svg").getroot().findall("{http://www.w3.org/2000/svg}rect")
    assert len(bars) >= 2 * 3  # plain and DFlash for two prompts and "all" (plus background and legend)


def test_report_prompts_from_a_directory_of_text_files(tmp_path):
    prompts = tmp_path / "texts"
    prompts.mkdir()
    (prompts / "b.txt").write_text("def fibonacci(n):\n")
    (prompts / "a.txt").write_text("import os\n\nclass Config:\n")
    (prompts / "ignored.md").write_text("not a prompt")
    cmd = [BIN, "bench", "-m", PAIR / "target", "-d", PAIR / "draft", "--prompts", prompts, "-n", "24",
           "--warmup", "0", "--repeats", "1", "-t", "1", "--report", tmp_path / "r.md", "--json", tmp_path / "r.json"]
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    j = json.loads((tmp_path / "r.json").read_text())
    assert [p["name"] for p in j["throughput"]["prompts"]] == ["a", "b"]


def test_scripted_acceptance_keeps_output_and_says_so(tmp_path):
    out = bench(tmp_path, "--acceptance", "agent", "--json", tmp_path / "b.json")
    assert "acceptance: scripted (profile agent): tau 2.65" in out
    assert "pairs.json" in out
    j = json.loads((tmp_path / "b.json").read_text())
    assert j["identical"] is True and j["acceptance_mode"] == "scripted (profile agent)"
    assert j["mean"]["acceptance_mode"] == "scripted (profile agent)"
    assert all(p["acceptance_mode"] == "scripted (profile agent)" for p in j["prompts"])
    assert len(j["acceptance_profile"]["accept_at_depth"]) == 15


def test_scripted_acceptance_follows_extreme_profiles(tmp_path):
    for curve, tau in (([1.0], 16.0), ([0.0], 1.0)):
        profile = tmp_path / "p.json"
        profile.write_text(json.dumps({"name": "edge", "source": "test", "accept_at_depth": curve}))
        bench(tmp_path, "--acceptance", profile, "--json", tmp_path / "e.json", prompts=1, new_tokens=65)
        j = json.loads((tmp_path / "e.json").read_text())
        assert j["identical"] is True and j["acceptance_mode"] == "scripted (profile edge)"
        # 64 tokens after the first: four full blocks, or 64 one-token cycles.
        assert j["mean"]["tau"] == tau, j["mean"]


def test_scripted_acceptance_errors_are_clear(tmp_path):
    cmd = [BIN, "bench", "-m", PAIR / "target", "-d", PAIR / "draft", "-n", "8", "--acceptance", "nosuch"]
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "acceptance profile 'nosuch' is neither a built-in" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"accept_at_depth": [0.5, 2]}')
    cmd[-1] = bad
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "accept_at_depth[1] = 2" in res.stderr and str(bad) in res.stderr


# The memory model's estimate of a run (src/plan/memory_model.h, EstimateRunMemory) against the
# peak RSS the run measured: within 10% plus 8 MiB (code and allocator slack the estimate's
# fixed runtime term only approximates). Measured on this machine: 36 and 46 MiB peak.
MEMORY_BOUND = (0.10, 8)


@pytest.mark.parametrize("quant", ["none", "q8_0"])
def test_report_memory_estimate_is_within_its_bound_of_peak_rss(tmp_path, quant):
    bench(tmp_path, "--report", tmp_path / "report.md", "--json", tmp_path / "report.json", "--target-quant", quant,
          "-c", "2048", prompts=1, new_tokens=8)
    m = json.loads((tmp_path / "report.json").read_text())["memory"]
    estimate_mib = m["estimate"]["total_bytes"] / 2**20
    rel, fixed = MEMORY_BOUND
    # A sanitized binary's RSS holds shadow memory and freed-block quarantine, which the estimate
    # rightly leaves out (150-171 MiB against 44-53 under `make asan`): the bound is checked by
    # the normal build's `make test`.
    if not os.environ.get("DFLASH_SANITIZE"):
        assert abs(estimate_mib - m["peak_rss_mib"]) <= rel * m["peak_rss_mib"] + fixed, (estimate_mib, m)
    # Quantised at load, the largest stored matrix counts once more (its pages are read while
    # quantising, then dropped): some of the target's file, not all of it.
    target_file = (PAIR / "target" / "model.safetensors").stat().st_size
    load = m["estimate"]["load_files_bytes"]
    assert load == 0 if quant == "none" else 0 < load < target_file
    md = (tmp_path / "report.md").read_text()
    assert "| measured peak RSS" in md and "| estimate (`src/plan/memory_model.h`" in md
