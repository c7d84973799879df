"""dflash trace record / replay / compare, driven with the official openai client.

The upstream here is a scripted stand-in for an OpenAI-compatible server (its answers, usage and
llama.cpp-style timings are fixed), so the test checks what the trace tools do with a stream:
pass it through unchanged, record it with its timing, re-send the same bodies, and read the
numbers back. The end-to-end replay against `dflash serve` lives with the server tests.
"""
import json
import os
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

DFLASH = os.environ.get("DFLASH_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "dflash"))
WORDS = ["Hello", ",", " world", "!"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"port {port} never opened")


class Upstream:
    """Scripted chat completions: WORDS as content, then usage and timings with `tau`."""

    def __init__(self, tau):
        self.tau = tau
        self.bodies = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                upstream.bodies.append(body)
                timings = {"prompt_n": 7, "cache_n": 3 if len(upstream.bodies) > 1 else 0, "predicted_n": len(WORDS),
                           "tokens_per_cycle": upstream.tau, "acceptance": 0.5, "mode": "dflash"}
                usage = {"prompt_tokens": 10, "completion_tokens": len(WORDS), "total_tokens": 10 + len(WORDS)}
                base = {"id": "chatcmpl-1", "created": 1, "model": "m"}
                if not body.get("stream"):
                    out = json.dumps({**base, "object": "chat.completion", "usage": usage, "timings": timings,
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": "".join(WORDS)}}]})
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out.encode())
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(obj):
                    data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()

                chunk = {**base, "object": "chat.completion.chunk"}
                send({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
                for w in WORDS:
                    time.sleep(0.02)
                    send({**chunk, "choices": [{"index": 0, "delta": {"content": w}}]})
                send({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "timings": timings})
                if body.get("stream_options", {}).get("include_usage"):
                    send({**chunk, "choices": [], "usage": usage})
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def run(*args, check=True):
    p = subprocess.run([DFLASH, "trace", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def recorded(tmp_path):
    """A trace of one streamed and one plain chat request, recorded through the proxy."""
    upstream = Upstream(tau=2.0)
    port = free_port()
    trace = tmp_path / "trace"
    proxy = subprocess.Popen([DFLASH, "trace", "record", "--upstream", upstream.url, "--port", str(port),
                              "--out", str(trace)], stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proxy)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        messages = [{"role": "user", "content": "hi"}]
        streamed = "".join(c.choices[0].delta.content or "" for c in
                           client.chat.completions.create(model="m", messages=messages, stream=True) if c.choices)
        plain = client.chat.completions.create(model="m", messages=messages, max_tokens=5)
        deadline = time.time() + 10
        while len(list(trace.glob("*.json"))) < 2 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        upstream.close()
    return trace, streamed, plain, upstream


def test_record_passes_streams_through_and_saves_them(recorded):
    trace, streamed, plain, upstream = recorded
    assert streamed == "".join(WORDS)
    assert plain.choices[0].message.content == "".join(WORDS)
    first = json.loads((trace / "000001.json").read_text())
    second = json.loads((trace / "000002.json").read_text())
    assert first["path"] == "/v1/chat/completions" and first["stream"] is True and first["status"] == 200
    assert first["request"] == upstream.bodies[0]
    contents = [json.loads(e["data"])["choices"][0]["delta"].get("content")
                for e in first["events"] if e["data"] != "[DONE]" and json.loads(e["data"])["choices"]]
    assert "".join(c for c in contents if c) == "".join(WORDS)
    times = [e["ms"] for e in first["events"]]
    assert times == sorted(times) and times[-1] - times[0] >= 4 * 20 * 0.5  # the upstream's pacing survives
    assert second["stream"] is False and second["request"]["max_tokens"] == 5
    assert second["response"]["choices"][0]["message"]["content"] == "".join(WORDS)


def test_replay_and_compare(recorded, tmp_path):
    trace = recorded[0]
    rows = {}
    for label, tau in (("a", 2.0), ("b", 4.0)):
        upstream = Upstream(tau=tau)
        try:
            out = tmp_path / f"{label}.jsonl"
            table = run("replay", str(trace), "--url", upstream.url, "--out", str(out)).stdout
        finally:
            upstream.close()
        assert upstream.bodies[0]["stream_options"] == {"include_usage": True}  # replay asks for usage
        assert {k: v for k, v in upstream.bodies[0].items() if k != "stream_options"} == recorded[3].bodies[0]
        rows[label] = [json.loads(line) for line in out.read_text().splitlines()]
        assert "2 requests, 0 errors" in table
    a = rows["a"]
    assert [r["index"] for r in a] == [1, 2]
    assert a[0]["completion_tokens"] == len(WORDS) and a[0]["prompt_tokens"] == 10
    assert a[0]["ttft_ms"] > 0 and a[0]["decode_tok_s"] > 0 and a[0]["tokens_per_cycle"] == 2.0
    assert a[0]["finish_reason"] == "stop" and a[0]["mode"] == "dflash"
    assert a[1]["ttft_ms"] == -1 and a[1]["cache_n"] == 3 and a[1]["cache_hit"] is True
    assert rows["b"][0]["tokens_per_cycle"] == 4.0
    cmp = run("compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")).stdout
    assert "2 requests in both" in cmp
    assert "2.00" in cmp and "4.00" in cmp


def test_errors_name_the_problem(tmp_path):
    p = run("replay", str(tmp_path / "missing"), "--url", "http://127.0.0.1:1", check=False)
    assert p.returncode == 1 and "missing" in p.stderr
    p = run("replay", "--url", "http://127.0.0.1:1", check=False)
    assert p.returncode == 1 and "DIR" in p.stderr
    p = run("frobnicate", check=False)
    assert p.returncode == 1 and "frobnicate" in p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    p = run("compare", str(bad), str(bad), check=False)
    assert p.returncode == 1 and "bad.jsonl:1" in p.stderr
    # A dead upstream: the proxy answers 502 in OpenAI's error shape and records it.
    port = free_port()
    proxy = subprocess.Popen([DFLASH, "trace", "record", "--upstream", f"http://127.0.0.1:{free_port()}",
                              "--port", str(port), "--out", str(tmp_path / "t")], stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proxy)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIStatusError) as e:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert e.value.status_code == 502 and "upstream" in str(e.value)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
