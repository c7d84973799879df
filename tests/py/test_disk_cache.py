"""The prefix cache's disk tier (`dflash serve --cache-dir DIR --cache-disk MIB`).

A second server on the same directory reuses a long prompt's prefix written by the first (at
shutdown, or when the RAM tier dropped it) with the same greedy output as a cold run; truncated,
tampered and foreign files are ignored with a warning and the request still succeeds; the
directory stays under its bound. On the shipped pair and on the hybrid fixture (Qwen3.5: KV plus
recurrent state).
"""
import re
import shutil
from pathlib import Path

import pytest

from test_serve import PAIR, ROOT, Server

FIXTURES = ROOT / "tests" / "fixtures"
HYBRID = dict(target=FIXTURES / "qwen35-tiny", draft=FIXTURES / "dflash-qwen35")
# The hybrid fixture has no tokenizer: its requests are token ids, decoded with the pair's.
HYBRID_ARGS = ("--tokenizer", str(PAIR / "target"))

LONG_TEXT = "".join(f"def step_{i}(state):\n    return state * {i} + {i * 7} % 13\n\n" for i in range(40))


def long_ids(n, salt):
    return [3 + (i * 37 + salt * 101) % 250 for i in range(n)]


def complete(server, prompt, max_tokens=12):
    status, body = server.json("POST", "/v1/completions",
                               {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, body
    return body


def cached(body):
    return body["usage"]["prompt_tokens_details"]["cached_tokens"]


def labelled_metric(server, name, labels):
    _, text = server.raw("GET", "/metrics")
    m = re.search("^" + re.escape(name) + "{" + re.escape(labels) + r"} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def files(d):
    return sorted(p for p in Path(d).iterdir() if p.suffix == ".dfseq")


def dir_bytes(d):
    return sum(p.stat().st_size for p in Path(d).iterdir() if p.is_file())


def start(cache_dir, *extra, hybrid=False, mib="64"):
    args = ("--ctx", "2048", "--cache-dir", str(cache_dir), "--cache-disk", mib, *extra)
    return Server(*args, *HYBRID_ARGS, **HYBRID) if hybrid else Server(*args)


@pytest.fixture(scope="module")
def cold_pair():
    s = Server("--ctx", "2048")
    yield s
    s.stop()


def test_restart_reuses_the_prefix_with_identical_output(tmp_path, cold_pair):
    cold = complete(cold_pair, LONG_TEXT)
    assert cached(cold) == 0 and cold["usage"]["prompt_tokens"] > 500
    a = start(tmp_path)
    first = complete(a, LONG_TEXT)
    assert first["choices"][0]["text"] == cold["choices"][0]["text"]
    a.stop()  # writes its slot's sequence
    assert len(files(tmp_path)) == 1

    b = start(tmp_path)
    warm = complete(b, LONG_TEXT)
    assert cached(warm) == warm["usage"]["prompt_tokens"] - 1
    assert warm["timings"]["cache_n"] == cached(warm)
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert labelled_metric(b, "dflash_cache_hits_total", 'tier="disk"') == 1
    assert b.metric("dflash_cache_disk_bytes_read_total") == files(tmp_path)[0].stat().st_size
    again = complete(b, LONG_TEXT)  # now from the slot
    assert cached(again) > 0 and again["choices"][0]["text"] == cold["choices"][0]["text"]
    assert labelled_metric(b, "dflash_cache_hits_total", 'tier="ram"') == 1
    b.stop()


def test_a_sequence_the_ram_tier_drops_is_written_and_loaded_back(tmp_path, cold_pair):
    other = LONG_TEXT.replace("state", "memo")
    s = start(tmp_path, "--parallel", "1")
    first = complete(s, LONG_TEXT)
    complete(s, other)  # takes the only slot: LONG_TEXT's sequence goes to disk
    assert s.metric("dflash_cache_disk_files_written_total") == 1
    back = complete(s, LONG_TEXT)
    assert cached(back) == back["usage"]["prompt_tokens"] - 1
    assert back["choices"][0]["text"] == first["choices"][0]["text"] == complete(cold_pair, LONG_TEXT)["choices"][0]["text"]
    assert labelled_metric(s, "dflash_cache_hits_total", 'tier="disk"') == 1
    s.stop()


def test_hybrid_restart_reuses_kv_and_recurrent_state(tmp_path):
    turn1 = long_ids(300, 1)
    a = start(tmp_path, hybrid=True)
    r1 = complete(a, turn1)
    a.stop()
    assert len(files(tmp_path)) == 1
    # The next turn extends the first (a hybrid restores its checkpoint at the end of a prompt).
    turn2 = turn1 + long_ids(40, 2)
    b = start(tmp_path, hybrid=True)
    warm = complete(b, turn2)
    assert cached(warm) >= len(turn1)
    assert labelled_metric(b, "dflash_cache_hits_total", 'tier="disk"') == 1
    b.stop()
    cold_server = Server("--ctx", "2048", *HYBRID_ARGS, **HYBRID)
    cold = complete(cold_server, turn2)
    cold_server.stop()
    assert cached(cold) == 0
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert r1["choices"][0]["text"]  # the first turn generated something


def spoil_truncate(f):
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


def spoil_tamper(f):
    data = bytearray(f.read_bytes())
    data[len(data) - 1000] ^= 0x10
    f.write_bytes(bytes(data))


@pytest.mark.parametrize("spoil", ["truncated", "tampered", "foreign"])
def test_bad_files_are_ignored_with_a_warning(tmp_path, cold_pair, spoil):
    good = tmp_path / "good"
    a = start(good)
    complete(a, LONG_TEXT)
    a.stop()
    (f,) = files(good)
    bad = tmp_path / "bad"
    bad.mkdir()
    if spoil == "foreign":
        # A hybrid server's file for the same tokens, renamed as the pair's would be.
        hybrid_dir = tmp_path / "hybrid"
        h = start(hybrid_dir, hybrid=True)
        ids = h.json("POST", "/tokenize", {"content": LONG_TEXT})[1]["tokens"]
        complete(h, [i % 256 for i in ids])  # the hybrid's vocabulary is 256
        h.stop()
        (hf,) = files(hybrid_dir)
        shutil.copy(hf, bad / f.name)
    else:
        shutil.copy(f, bad / f.name)
        (spoil_truncate if spoil == "truncated" else spoil_tamper)(bad / f.name)
    s = start(bad)
    body = complete(s, LONG_TEXT)
    assert cached(body) == 0
    assert body["choices"][0]["text"] == complete(cold_pair, LONG_TEXT)["choices"][0]["text"]
    assert s.metric("dflash_cache_disk_rejected_total") >= 1
    assert labelled_metric(s, "dflash_cache_hits_total", 'tier="disk"') == 0
    s.stop()
    assert any("warning: disk cache: ignoring" in line for line in s.log), "".join(s.log)


def test_the_directory_stays_under_its_bound(tmp_path):
    probe = tmp_path / "probe"
    a = start(probe)
    complete(a, LONG_TEXT, max_tokens=4)
    a.stop()
    one = files(probe)[0].stat().st_size
    bound_mib = one * 2.5 / (1 << 20)
    d = tmp_path / "bounded"
    s = start(d, "--parallel", "1", mib=f"{bound_mib:.6f}")
    for i in range(6):
        complete(s, LONG_TEXT.replace("state", f"s{i}x"), max_tokens=4)
        assert dir_bytes(d) <= bound_mib * (1 << 20)
    assert s.metric("dflash_cache_disk_evicted_total") >= 3
    s.stop()
    assert dir_bytes(d) <= bound_mib * (1 << 20)
    assert 1 <= len(files(d)) <= 2
