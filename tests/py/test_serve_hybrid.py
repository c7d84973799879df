"""`dflash serve` on a hybrid target (tests/fixtures/qwen35-tiny, Gated DeltaNet + attention):
the per-sequence memory the server reserves, reports and budgets --cache-ram with, against the
state's layout computed here from config.json alone, and prefix reuse from state checkpoints.

The fixture has no tokenizer of its own (vocab 256): requests send token ids to /v1/completions,
and models/dflash-pair's tokenizer only turns the output ids into text.
"""
import json
import re
import subprocess

import pytest

from test_serve import BIN, PAIR, ROOT, Server

TINY = ROOT / "tests" / "fixtures" / "qwen35-tiny"
CTX = 128            # a whole number of 32-position key tiles: no padding in the KV cache
PREFILL_CHUNK = 64   # the default: rows per Forward, so the row log holds 64 rows
F32 = 4


def sequence_bytes(checkpoints):
    """One sequence's target state with an f32 KV cache, from the config: the full-attention layers'
    K and V, and per linear layer the conv and recurrent state twice (before / after the last
    Forward), the row log (conv inputs, decay, beta per row) and one copy per checkpoint."""
    c = json.loads((TINY / "config.json").read_text())
    linear = c["layer_types"].count("linear_attention")
    full = c["num_hidden_layers"] - linear
    kv = 2 * full * c["num_key_value_heads"] * CTX * c["head_dim"] * F32
    conv_dim = 2 * c["linear_num_key_heads"] * c["linear_key_head_dim"] + \
        c["linear_num_value_heads"] * c["linear_value_head_dim"]
    conv = (c["linear_conv_kernel_dim"] - 1) * conv_dim
    rec = c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"]
    log = PREFILL_CHUNK * (conv_dim + 2 * c["linear_num_value_heads"])
    return kv + linear * ((2 + checkpoints) * (conv + rec) + log) * F32


def hybrid_server(*extra):
    return Server("--ctx", str(CTX), "--kv-type", "f32", "--tokenizer", str(PAIR / "target"), *extra,
                  target=TINY, draft=None)


def banner_bytes(server):
    m = re.search(r"reserved: [\d.]+ MiB per sequence \((\d+) bytes: KV \+ recurrent state", "".join(server.log))
    assert m, "".join(server.log)
    return int(m.group(1))


def complete(server, ids, n=6):
    status, body = server.json("POST", "/v1/completions",
                               {"prompt": ids, "max_tokens": n, "temperature": 0, "ignore_eos": True})
    assert status == 200, body
    return body


@pytest.mark.parametrize("checkpoints", [0, 3])
def test_reported_sequence_bytes_are_the_hybrid_state(checkpoints):
    s = hybrid_server("--ctx-checkpoints", str(checkpoints), "--parallel", "2")
    try:
        want = sequence_bytes(checkpoints)
        assert banner_bytes(s) == want
        assert s.metric("dflash_sequence_bytes") == want
        assert s.metric("dflash_cache_reserved_bytes") == 2 * want
    finally:
        s.stop()


def test_cache_ram_budget_holds_whole_hybrid_sequences():
    per = sequence_bytes(8)
    # Room for two sequences and a half: two are saved, the third conversation evicts the oldest.
    mib = 2.5 * per / 2**20
    s = hybrid_server("--parallel", "1", "--cache-ram", f"{mib:.6f}")
    try:
        assert "1 slot(s) + 2 saved sequence(s)" in "".join(s.log)
        assert s.metric("dflash_saved_sequences") == 2
        assert s.metric("dflash_cache_reserved_bytes") == 3 * per
        convs = [[10 + i, 20, 30, 40, 50, 60, 70, 80 + i] for i in range(4)]
        first = [complete(s, ids) for ids in convs[:3]]
        # A next turn of conversation 1 (its prompt, then a token of its own): the slot holds 2,
        # RAM holds 1 and 0 (LRU), so 1 comes back, resuming at its prompt's checkpoint.
        again = complete(s, convs[1] + [99])
        assert again["timings"]["cache_n"] == len(convs[1])
        # A fourth conversation pushes out the least recently used, conversation 0.
        complete(s, convs[3])
        gone = complete(s, convs[0] + [99])
        assert gone["timings"]["cache_n"] == 0
    finally:
        s.stop()


def greedy_ids(prompt, n):
    """The target's greedy reply to `prompt` as token ids (dflash generate), to build a next turn from."""
    res = subprocess.run([BIN, "generate", "--json", "--threads", "1", "-m", str(TINY), "--ctx", str(CTX),
                          "--kv-type", "f32", "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n), "--no-eos"],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])["tokens"]


def test_second_turn_departing_inside_the_reply_resumes_from_a_checkpoint():
    s = hybrid_server("--parallel", "1", "--ctx-checkpoints", "4", "--ctx-checkpoints-interval", "4",
                      "--prefill-chunk", "4")
    try:
        prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        first = complete(s, prompt, n=16)
        assert first["timings"]["cache_n"] == 0
        reply = greedy_ids(prompt, 16)
        # The next turn keeps 9 of the reply's tokens, then departs (at position 19).
        turn = prompt + reply[:9] + [(reply[9] + 1) % 256]
        warm = complete(s, turn, n=8)
        # Checkpoints: prefill chunks start at 4 and 8, the prompt ends at 10, decoding passes 14, 18
        # and 22; the ring of 4 keeps 10, 14, 18, 22, and 18 is the longest inside the common prefix.
        assert warm["timings"]["cache_n"] == 18
        cold = hybrid_server("--parallel", "1")
        try:
            assert complete(cold, turn, n=8)["choices"][0]["text"] == warm["choices"][0]["text"]
        finally:
            cold.stop()
    finally:
        s.stop()
