"""`dflash serve` driven by the official openai package (and raw HTTP for the error cases).

Servers run models/dflash-pair (a 7.3M-parameter target + DFlash draft) on a free port; each
fixture starts one, waits for /health and stops it afterwards.
"""
import json
import os
import random
import re
import socket
import subprocess
import threading
import time
import http.client
from pathlib import Path

import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("DFLASH_BIN", str(ROOT / "build" / "bin" / "dflash"))
PAIR = ROOT / "models" / "dflash-pair"
QWEN3_TEMPLATE = ROOT / "tests" / "data" / "templates" / "Qwen-Qwen3-0.6B.jinja"  # vendored, tests/data/NOTICE.md


class Server:
    def __init__(self, *extra, target=PAIR / "target", draft=PAIR / "draft"):
        models = ["-m", str(target)] + (["-d", str(draft)] if draft else [])
        cmd = [BIN, "serve", *models, "--port", "0", "--threads", "1", *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.log = []
        deadline = time.time() + 60
        self.port = None
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("server did not start: " + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                if self.raw("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("no /health")
            time.sleep(0.05)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=120)

    def raw(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        text = r.read().decode()
        conn.close()
        return r.status, text

    def json(self, method, path, body=None, headers=None):
        status, text = self.raw(method, path, body, headers)
        return status, json.loads(text)

    def metric(self, name):
        _, text = self.raw("GET", "/metrics")
        m = re.search("^" + re.escape(name) + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        assert self.proc.returncode == 0, "".join(self.log)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    diag = tmp_path_factory.mktemp("diag")
    s = Server("--parallel", "2", "--ctx", "1024", "--test-scripted-output", "--diagnostics", str(diag))
    s.diag = diag
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tool_server():
    s = Server("--ctx", "2048", "--test-scripted-output", "--chat-template", str(QWEN3_TEMPLATE))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def strict_server():
    s = Server("--ctx", "256", "--api-key", "sekrit", "--strict-model", "--alias", "pair", "--max-body", "0.01")
    yield s
    s.stop()


USER = [{"role": "user", "content": "def fibonacci(n):"}]


def test_models_and_health(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["dflash"]
    assert server.json("GET", "/health") == (200, {"status": "ok"})


def test_plain_chat_has_usage_and_timings(server):
    r = server.client().chat.completions.create(model="anything", messages=USER, max_tokens=24)
    assert r.model == "anything"  # any model name is served without --strict-model
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.choices[0].message.role == "assistant"
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 24
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    t = r.model_extra["timings"]
    for k in ("prompt_n", "cache_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
              "predicted_per_second", "draft_n", "draft_n_accepted", "tokens_per_cycle", "acceptance", "cycles", "mode"):
        assert k in t, k
    assert t["prompt_n"] + t["cache_n"] == u.prompt_tokens
    assert t["predicted_n"] == u.completion_tokens
    assert t["mode"] == "dflash"
    assert 0 <= t["draft_n_accepted"] <= t["draft_n"]


def test_streamed_chat_adds_up_to_plain(server):
    c = server.client()
    plain = c.chat.completions.create(model="m", messages=USER, max_tokens=40, temperature=0)
    chunks = list(c.chat.completions.create(model="m", messages=USER, max_tokens=40, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finish == [plain.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert chunks[-1].model_extra["timings"]["predicted_n"] == plain.usage.completion_tokens


def test_greedy_http_equals_generate(server):
    out = subprocess.run([BIN, "generate", "-m", str(PAIR / "target"), "-d", str(PAIR / "draft"), "--chat",
                          "-p", USER[0]["content"], "-n", "48", "--json", "--threads", "1"],
                         capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout)
    r = server.client().chat.completions.create(model="m", messages=USER, max_tokens=48, temperature=0)
    assert r.usage.prompt_tokens == ref["prompt_tokens"]
    assert r.usage.completion_tokens == ref["completion_tokens"]
    tokens = ref["tokens"]
    if ref["finish_reason"] == "stop":
        tokens = tokens[:-1]  # the end-of-turn token is not part of the reply
    _, detok = server.json("POST", "/detokenize", {"tokens": tokens})
    assert r.choices[0].message.content == detok["content"]


def test_penalties_http_equal_generate_flags(server):
    # The same penalties through the CLI's flags and a request's fields give the same greedy reply,
    # and they change it (the toy model repeats itself).
    pen = {"presence_penalty": 0.3, "frequency_penalty": 0.5, "repeat_penalty": 1.3}
    out = subprocess.run([BIN, "generate", "-m", str(PAIR / "target"), "-d", str(PAIR / "draft"), "--chat",
                          "-p", USER[0]["content"], "-n", "48", "--json", "--threads", "1",
                          "--presence-penalty", "0.3", "--frequency-penalty", "0.5", "--repeat-penalty", "1.3"],
                         capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout)
    c = server.client()
    r = c.chat.completions.create(model="m", messages=USER, max_tokens=48, temperature=0, extra_body=pen)
    plain = c.chat.completions.create(model="m", messages=USER, max_tokens=48, temperature=0)
    tokens = ref["tokens"][:-1] if ref["finish_reason"] == "stop" else ref["tokens"]
    _, detok = server.json("POST", "/detokenize", {"tokens": tokens})
    assert r.choices[0].message.content == detok["content"]
    assert r.choices[0].message.content != plain.choices[0].message.content


def test_completions_plain_and_streamed(server):
    c = server.client()
    r = c.completions.create(model="m", prompt="import os\n", max_tokens=20, temperature=0)
    assert r.object == "text_completion" and r.usage.completion_tokens > 0
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model="m", prompt="import os\n", max_tokens=20, temperature=0, stream=True) if ch.choices)
    assert streamed == r.choices[0].text
    ids = server.json("POST", "/tokenize", {"content": "import os\n"})[1]["tokens"]
    by_ids = c.completions.create(model="m", prompt=ids, max_tokens=20, temperature=0)
    assert by_ids.choices[0].text == r.choices[0].text


def test_stop_sequences_cut_the_text(server):
    c = server.client()
    full = c.completions.create(model="m", prompt="class Foo:\n", max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    text = full.choices[0].text
    assert len(text) > 10
    stop = text[5:8]
    cut = c.completions.create(model="m", prompt="class Foo:\n", max_tokens=40, temperature=0, stop=[stop],
                               extra_body={"ignore_eos": True})
    assert cut.choices[0].text == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_sampling_is_seeded(server):
    # Only the reproducible rule promises the same tokens for the same seed: rejection sampling
    # (the default) is exact in distribution, but its draws depend on the verify lengths the
    # adaptive policy picks from timings.
    c = server.client()
    kw = dict(model="m", messages=USER, max_tokens=16, temperature=0.9, top_p=0.95, seed=7,
              extra_body={"spec_sampling": "reproducible"})
    a = c.chat.completions.create(**kw)
    b = c.chat.completions.create(**kw)
    assert a.choices[0].message.content == b.choices[0].message.content


def test_multi_turn_hits_the_prefix_cache(server):
    c = server.client()
    messages = [{"role": "system", "content": "You write Python."},
                {"role": "user", "content": "def parse_args(argv):"}]
    r1 = c.chat.completions.create(model="m", messages=messages, max_tokens=32, temperature=0)
    messages += [{"role": "assistant", "content": r1.choices[0].message.content},
                 {"role": "user", "content": "now add a docstring"}]
    r2 = c.chat.completions.create(model="m", messages=messages, max_tokens=16, temperature=0)
    t = r2.model_extra["timings"]
    assert t["cache_n"] >= r1.usage.prompt_tokens  # the whole first prompt at least
    assert t["prompt_n"] == r2.usage.prompt_tokens - t["cache_n"]
    assert r2.usage.prompt_tokens_details.cached_tokens == t["cache_n"]
    # The reused prefix changes nothing: the same request on a cold sequence gives the same reply.
    r3 = c.chat.completions.create(model="m", messages=messages, max_tokens=16, temperature=0)
    assert r3.choices[0].message.content == r2.choices[0].message.content


def test_concurrent_requests(server):
    c = server.client()
    prompts = [f"def function_{i}(x):" for i in range(4)]
    want = [c.chat.completions.create(model="m", messages=[{"role": "user", "content": p}], max_tokens=24,
                                      temperature=0).choices[0].message.content for p in prompts]
    got = [None] * 4

    def run(i):
        got[i] = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompts[i]}],
                                           max_tokens=24, temperature=0).choices[0].message.content

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_disconnect_cancels_generation(server):
    before = server.metric('dflash_generations_total{finish_reason="cancelled"}')
    tokens_before = server.metric("dflash_completion_tokens_total")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": "import sys\n", "max_tokens": 900, "stream": True, "ignore_eos": True}),
        headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    r.fp.readline()  # the first event arrived: generation is running
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    deadline = time.time() + 30
    while server.metric('dflash_generations_total{finish_reason="cancelled"}') == before:
        assert time.time() < deadline, "generation was not cancelled"
        time.sleep(0.05)
    assert server.metric("dflash_completion_tokens_total") - tokens_before < 900
    assert server.json("GET", "/health")[0] == 200


def test_metrics_and_diagnostics(server):
    server.client().chat.completions.create(model="m", messages=USER, max_tokens=8)
    _, text = server.raw("GET", "/metrics")
    for name in ("dflash_requests_total", "dflash_completion_tokens_total", "dflash_request_duration_seconds_bucket",
                 "dflash_decode_tokens_per_second_bucket", "dflash_spec_cycles_total",
                 'dflash_spec_position_accepted_total{position="1"}', 'dflash_experts_read_total{pass="verify"}'):
        assert name in text, name
    assert server.metric("dflash_spec_drafted_tokens_total") > 0
    run, = [p for p in server.diag.iterdir() if p.is_dir()]  # one folder per server run
    lines = (run / "requests.jsonl").read_text().splitlines()
    rec = json.loads(lines[-1])
    for k in ("ttft_ms", "wall_ms", "finish_reason", "cache_hit", "peak_rss_mib", "usage", "timings"):
        assert k in rec, k
    summary = json.loads((run / "summary.json").read_text())
    assert summary["requests"] == len(lines)


def test_tokenize_round_trip(server):
    _, t = server.json("POST", "/tokenize", {"content": "print('héllo')"})
    assert server.json("POST", "/detokenize", {"tokens": t["tokens"]})[1]["content"] == "print('héllo')"


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_tool_call_round_trip(tool_server):
    c = tool_server.client()
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    # Response side: a scripted completion goes through detokenisation, the output parser and SSE.
    script = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    r = c.chat.completions.create(model="m", messages=ask, tools=TOOLS, extra_body={"dflash_scripted_output": script})
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Let me check."
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    stream = list(c.chat.completions.create(model="m", messages=ask, tools=TOOLS, stream=True,
                                            extra_body={"dflash_scripted_output": script}))
    deltas = [d.choices[0].delta for d in stream if d.choices]
    streamed_calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert [(tc.index, tc.function.name, json.loads(tc.function.arguments)) for tc in streamed_calls] == \
        [(0, "get_weather", {"city": "Paris"})]
    assert "".join(d.content or "" for d in deltas) == "Let me check."
    assert stream[-1].choices[0].finish_reason == "tool_calls"

    # Request side: the assistant's call and the tool's result render through the real template.
    history = ask + [msg.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"}]
    status, rendered = tool_server.json("POST", "/apply-template", {"messages": history, "tools": TOOLS})
    assert status == 200
    prompt = rendered["prompt"]
    assert '"name": "get_weather"' in prompt and "<tools>" in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsunny, 21C\n</tool_response>" in prompt
    final = c.chat.completions.create(model="m", messages=history, tools=TOOLS, max_tokens=8)
    assert final.usage.prompt_tokens > 50


def test_tool_choice_named_forces_the_call(tool_server):
    c = tool_server.client()
    r = c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        extra_body={"dflash_scripted_output": '{"city": "Oslo"}}\n</tool_call>'})
    calls = r.choices[0].message.tool_calls
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [("get_weather", {"city": "Oslo"})]
    none = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                     tool_choice="none", extra_body={"dflash_scripted_output": "<tool_call>x</tool_call>"})
    assert none.choices[0].message.tool_calls is None


def test_reasoning_content_is_split(tool_server):
    r = tool_server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "2+2?"}],
        extra_body={"dflash_scripted_output": "<think>\nsimple sum\n</think>\n\n4"})
    assert r.choices[0].message.content == "4"
    assert r.choices[0].message.model_extra["reasoning_content"] == "simple sum"


def expect_error(fn, cls, status):
    with pytest.raises(cls) as e:
        fn()
    assert e.value.status_code == status
    body = e.value.body
    assert isinstance(body, dict) and body.get("message"), body
    return e.value


def test_errors(server, strict_server):
    c = server.client()
    for status, text in [server.raw("POST", "/v1/chat/completions", "{not json"),
                         server.raw("POST", "/v1/chat/completions", "[1]"),
                         server.raw("POST", "/v1/completions", '{"prompt": 5}')]:
        assert status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"
    e = expect_error(lambda: c.chat.completions.create(model="m", messages=USER, max_tokens="ten"), openai.BadRequestError, 400)
    assert e.param == "max_tokens"
    e = expect_error(lambda: c.chat.completions.create(model="m", messages=USER, temperature=5), openai.BadRequestError, 400)
    assert e.param == "temperature"
    e = expect_error(lambda: c.chat.completions.create(model="m", messages=USER, presence_penalty=3.0),
                     openai.BadRequestError, 400)
    assert e.param == "presence_penalty"
    e = expect_error(lambda: c.chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * 1500}]),
                     openai.BadRequestError, 400)
    assert e.code == "context_length_exceeded"
    assert server.raw("GET", "/no/such/route")[0] == 404

    s = strict_server
    expect_error(lambda: s.client(key="wrong").models.list(), openai.AuthenticationError, 401)
    status, body = s.json("GET", "/v1/models")
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    good = s.client(key="sekrit")
    assert [m.id for m in good.models.list().data] == ["pair"]
    e = expect_error(lambda: good.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=4),
                     openai.NotFoundError, 404)
    assert e.code == "model_not_found"
    assert good.chat.completions.create(model="pair", messages=USER, max_tokens=4).usage.completion_tokens > 0
    status, body = s.json("POST", "/v1/chat/completions", {"model": "pair", "messages": USER, "pad": "x" * 20000},
                          headers={"Authorization": "Bearer sekrit"})
    assert status == 413 and "error" in body


def test_fuzz_never_crashes(server):
    rng = random.Random(1234)
    valid = {"model": "m", "messages": USER, "max_tokens": 2}
    values = [None, True, -1, 0, 2 ** 70, 1.5, float("inf"), "", "x", [], [1, "a"], {}, {"a": {"b": []}}]
    keys = ["messages", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "tools",
            "tool_choice", "stream_options", "chat_template_kwargs", "n", "logit_bias", "prompt", "content", "tokens"]
    paths = ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize", "/apply-template"]
    for i in range(150):
        path = rng.choice(paths)
        kind = rng.random()
        if kind < 0.2:
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        elif kind < 0.3:
            body = json.dumps(valid)[: rng.randrange(1, 40)]
        else:
            obj = dict(valid)
            for _ in range(rng.randrange(1, 4)):
                obj[rng.choice(keys)] = rng.choice(values)
            if rng.random() < 0.3:
                obj["messages"] = [{"role": rng.choice(["user", "tool", "x", 3]), "content": rng.choice(values)}]
            body = json.dumps(obj, allow_nan=True)
        status, text = server.raw("POST", path, body)
        assert status in (200, 400), (path, body, status, text)
        if status == 400:
            assert "message" in json.loads(text)["error"]
    assert server.json("GET", "/health")[0] == 200


def test_timeout_ends_a_long_generation():
    s = Server("--ctx", "4096", "--timeout", "1")
    try:
        start = time.time()
        r = s.client().completions.create(model="m", prompt="import re\n", max_tokens=4000,
                                          extra_body={"ignore_eos": True})
        assert time.time() - start < 20
        assert r.choices[0].finish_reason == "length"
        assert r.usage.completion_tokens < 4000
        assert s.metric("dflash_generations_timed_out_total") == 1
    finally:
        s.stop()


def test_cache_ram_keeps_conversations_beyond_the_slots():
    # 11 MiB holds two whole f32-cache sequences of this pair at --ctx 512.
    s = Server("--ctx", "512", "--parallel", "1", "--cache-ram", "11", "--kv-type", "f32")
    try:
        assert "1 slot(s) + 2 saved sequence(s)" in "".join(s.log)
        c = s.client()
        convs = [[{"role": "user", "content": f"def handler_{i}(request):"}] for i in range(2)]
        first = [c.chat.completions.create(model="m", messages=m, max_tokens=8, temperature=0) for m in convs]
        # Conversation 0 again, after conversation 1 took the only slot: it comes back from RAM.
        again = c.chat.completions.create(model="m", messages=convs[0], max_tokens=8, temperature=0)
        assert again.model_extra["timings"]["cache_n"] == first[0].usage.prompt_tokens - 1
        assert again.choices[0].message.content == first[0].choices[0].message.content
    finally:
        s.stop()
