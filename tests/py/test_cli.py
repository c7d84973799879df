"""dflash's command line as a llama.cpp user meets it: text prompts from files and JSONL, a GGUF's
own chat template, warnings about the context, clear errors, and the --compare demo's header.
Runs build/bin/dflash on the shipped pair (models/dflash-pair, which has a tokenizer and a chat
template) and the tiny fixture target (tests/fixtures/qwen3-tiny: token ids only)."""
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("DFLASH_BIN", str(ROOT / "build" / "bin" / "dflash"))
PAIR = ROOT / "models" / "dflash-pair"
TARGET, DRAFT = PAIR / "target", PAIR / "draft"
TINY = ROOT / "tests" / "fixtures" / "qwen3-tiny"  # max_position_embeddings 512, no tokenizer


def dflash(*args, check=True):
    res = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and res.returncode != 0:
        raise AssertionError(f"dflash {' '.join(map(str, args))} exited {res.returncode}:\n{res.stderr}")
    return res


def generate_json(*args):
    res = dflash("generate", "--json", "--threads", "1", *args)
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


# ---- text prompts (issue 36 item 3) ----

def test_prompt_file_is_text(tmp_path):
    text = "def fibonacci(n):\n    "
    (tmp_path / "prompt.txt").write_text(text)
    from_file, _ = generate_json("-m", TARGET, "--prompt-file", tmp_path / "prompt.txt", "-n", 8)
    inline, _ = generate_json("-m", TARGET, "--prompt", text, "-n", 8)
    assert from_file["prompt_tokens"] == inline["prompt_tokens"] > 3
    assert from_file["tokens"] == inline["tokens"]


def test_prompt_ids_from_a_file(tmp_path):
    (tmp_path / "ids.txt").write_text("1, 2, 3,4\n")
    from_file, _ = generate_json("-m", TINY, "--prompt-ids", f"@{tmp_path / 'ids.txt'}", "-n", 4)
    inline, _ = generate_json("-m", TINY, "--prompt-ids", "1,2,3,4", "-n", 4)
    assert from_file["prompt_tokens"] == 4
    assert from_file["tokens"] == inline["tokens"]


def test_help_says_what_prompt_file_holds():
    out = dflash("generate", "--help").stdout
    assert re.search(r"--prompt-file FILE\s+prompt text read from FILE", out)
    assert "@FILE" in out


def test_bench_reads_text_chat_and_id_prompts(tmp_path):
    messages = [{"role": "user", "content": "Write a function that sorts a list."}]
    text = "import os\n\ndef walk(path):\n"
    lines = [{"name": "text", "prompt": text},
             {"name": "chat", "messages": messages},
             {"name": "ids", "prompt_ids": [5, 6, 7, 8, 9]}]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(l) + "\n" for l in lines))
    out = tmp_path / "bench.json"
    dflash("bench", "-m", TARGET, "-d", DRAFT, "--prompts", prompts, "-n", 4, "--warmup", 0, "--repeats", 1,
           "--threads", 1, "--json", out)
    got = {p["name"]: p["prompt_tokens"] for p in json.loads(out.read_text())["prompts"]}
    (tmp_path / "messages.json").write_text(json.dumps(messages))
    chat, _ = generate_json("-m", TARGET, "--messages", tmp_path / "messages.json", "-n", 1)
    plain, _ = generate_json("-m", TARGET, "--prompt", text, "-n", 1)
    assert got == {"text": plain["prompt_tokens"], "chat": chat["prompt_tokens"], "ids": 5}


@pytest.mark.parametrize("line, message", [
    ('{"name": "x", "prompt": 3}', '"prompt" must be a string'),
    ('{"name": "x", "prompt": "a", "prompt_ids": [1]}', 'exactly one of'),
    ('{"name": "x", "messages": "hi"}', '"messages" must be an array'),
    ('[1, 2]', 'expected a JSON object'),
])
def test_bench_names_the_bad_prompt_line(tmp_path, line, message):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2]}\n' + line + "\n")
    res = dflash("bench", "-m", TARGET, "--prompts", prompts, "-n", 2, check=False)
    assert res.returncode == 1
    assert f"{prompts}:2: " in res.stderr and message in res.stderr, res.stderr


def test_text_prompt_without_a_tokenizer_says_so():
    res = dflash("generate", "-m", TINY, "--prompt", "hello", check=False)
    assert res.returncode == 1
    assert f"{TINY}: no tokenizer" in res.stderr and "Traceback" not in res.stderr


# ---- a GGUF's own chat template (item 4) ----

@pytest.fixture(scope="module")
def pair_gguf(tmp_path_factory):
    """The shipped target converted by tools/hf_to_gguf.py, which stores tokenizer_config.json's
    chat_template as tokenizer.chat_template, as llama.cpp's converter does."""
    out = tmp_path_factory.mktemp("gguf") / "pair-target.gguf"
    subprocess.run([sys.executable, str(ROOT / "tools" / "hf_to_gguf.py"), str(TARGET), str(out), "--outtype", "f32"],
                   check=True, capture_output=True)
    assert b"tokenizer.chat_template" in out.read_bytes()[:4 << 20]
    return out


def test_gguf_chat_uses_its_own_template(pair_gguf):
    args = ("--chat", "--prompt", "Write hello world in Python.", "-n", 12, "--kv-type", "f32")
    from_gguf, _ = generate_json("-m", pair_gguf, *args)
    from_dir, _ = generate_json("-m", TARGET, *args)
    assert from_gguf["prompt_tokens"] == from_dir["prompt_tokens"]
    assert from_gguf["tokens"] == from_dir["tokens"]
    assert from_gguf["message"] == from_dir["message"]


def test_gguf_serve_offers_chat_completions(pair_gguf):
    proc = subprocess.Popen([BIN, "serve", "-m", str(pair_gguf), "--port", "0", "--threads", "1", "--ctx", "256"],
                            stderr=subprocess.PIPE, text=True)
    try:
        log = []
        while not any("listening on" in l for l in log):
            line = proc.stderr.readline()
            assert line, "server exited:\n" + "".join(log)
            log.append(line)
        assert not any("unavailable" in l for l in log), "".join(log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- context and paths (item 5) ----

def test_ctx_beyond_the_trained_positions_warns():
    result, stderr = generate_json("-m", TINY, "--prompt-ids", "1,2,3", "-n", 2, "--ctx", 600)
    assert re.search(r"warning: .*600.*512", stderr), stderr
    assert any("600" in n and "512" in n for n in result["notes"])


def test_ctx_within_the_trained_positions_is_quiet():
    result, stderr = generate_json("-m", TINY, "--prompt-ids", "1,2,3", "-n", 2, "--ctx", 512)
    assert "warning" not in stderr and result["notes"] == []


def test_output_cut_by_the_context_says_so():
    result, stderr = generate_json("-m", TINY, "--prompt-ids", "1,2,3", "-n", 40, "--ctx", 16, "--no-eos")
    assert result["finish_reason"] == "length" and result["completion_tokens"] < 40
    assert re.search(r"note: stopped after \d+ of 40 tokens.*context of 16", stderr), stderr
    assert any("context of 16" in n for n in result["notes"])


def test_output_that_reaches_n_has_no_note():
    result, stderr = generate_json("-m", TINY, "--prompt-ids", "1,2,3", "-n", 5, "--ctx", 64, "--no-eos")
    assert result["completion_tokens"] == 5 and result["notes"] == [] and "note:" not in stderr


@pytest.mark.parametrize("flag", ["-m", "-d"])
def test_a_missing_model_path_is_not_found(tmp_path, flag):
    missing = tmp_path / "no-such-model"
    args = ["-m", missing] if flag == "-m" else ["-m", TARGET, "-d", missing]
    res = dflash("generate", *args, "--prompt", "hi", check=False)
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: {missing}: not found"


# ---- progress on a terminal (item 6) ----

def run_with_terminal_stderr(*args):
    """Runs dflash with stderr on a pseudo-terminal; returns (stdout, what the terminal showed)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    stdout = proc.stdout.read()
    assert proc.wait(timeout=60) == 0, shown
    os.close(controller)
    return stdout.decode(), shown.decode()


def test_progress_shows_on_a_terminal_only():
    args = ("generate", "-m", TINY, "--prompt-ids", ",".join(["5"] * 100), "-n", 2, "--prefill-chunk", 16, "--json")
    stdout, shown = run_with_terminal_stderr(*args)
    assert f"loading {TINY}" in shown and "prefill 100/100" in shown, shown
    assert json.loads(stdout)["prompt_tokens"] == 100
    piped = dflash(*args)
    assert "prefill" not in piped.stderr and "loading" not in piped.stderr


# ---- make run's demo (item 7) ----

def test_compare_says_what_it_shows():
    res = dflash("generate", "-m", TARGET, "-d", DRAFT, "--prompt", "def add(a, b):", "-n", 16, "--compare",
                 "--threads", 1)
    header = res.stdout.split("\n\n")[0]
    assert header.startswith("Comparing plain decoding with DFlash speculative decoding on the same prompt.")
    assert "identical" in header and "speedup" in header
    assert "A model this small repeats itself" in header
    assert "outputs identical" in res.stdout
