"""`dflash serve` and `dflash trace record` under hostile input and load, on loopback.

Raw sockets where the attack is in the bytes (invalid UTF-8, slow or endless requests, bodies
without a key); the server is test_serve.py's (the shipped pair, a free port).
"""
import json
import socket
import subprocess
import threading
import time

import pytest

from test_serve import BIN, PAIR, USER, Server
from test_trace import Upstream, free_port, wait_for_port

KEY = "sekrit"


def send_raw(port, data, read=True, timeout=10):
    """Sends `data` on a fresh connection; returns (status, body text) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if not read:
            return None
        return read_response(s)


def read_response(s):
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(65536)
        if not chunk:
            break
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    while length and len(body) < length[0]:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), body.decode(errors="replace")


def rss_mib(proc):
    with open(f"/proc/{proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    diag = tmp_path_factory.mktemp("diag")
    s = Server("--ctx", "512", "--api-key", KEY, "--max-body", "0.01", "--diagnostics", str(diag))
    s.diag = diag
    yield s
    s.stop()


def authed(headers=None):
    return {"Authorization": f"Bearer {KEY}", **(headers or {})}


def test_invalid_utf8_in_the_path_is_a_404_not_an_abort(keyed):
    for path in (b"/%FF", b"/\xff\xfe", b"/v1/%C0%AF"):
        status, body = send_raw(keyed.port, b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 404 and json.loads(body)["error"]["message"].startswith("unknown endpoint")
    assert keyed.raw("GET", "/health")[0] == 200


def test_slow_loris_clients_do_not_starve_health(keyed):
    socks = []
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.5):  # one header line every half second: never a read timeout
            for s in socks:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    try:
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", keyed.port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        threading.Thread(target=trickle, daemon=True).start()
        time.sleep(1)
        for _ in range(5):
            start = time.time()
            assert keyed.raw("GET", "/health")[0] == 200
            assert time.time() - start < 1.0
    finally:
        stop.set()
        for s in socks:
            s.close()


def test_connection_flags_are_checked_and_applied():
    bad = subprocess.run([BIN, "serve", "-m", str(PAIR / "target"), "--port", "0", "--max-connections", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--max-connections" in bad.stderr
    s = Server("--ctx", "256", "--max-connections", "2", "--request-timeout", "1")
    try:
        slow = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(2)]
        for c in slow:
            c.sendall(b"GET /health HTTP/1.1\r\n")
        time.sleep(0.2)
        status, body = send_raw(s.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 503 and json.loads(body)["error"]["code"] == "too_many_connections"
        time.sleep(1.5)  # past --request-timeout: the slow ones are cut off, /health answers again
        assert s.raw("GET", "/health")[0] == 200
        for c in slow:
            c.close()
    finally:
        s.stop()


def test_chunked_body_over_max_body_is_refused_without_buffering(keyed):
    before = rss_mib(keyed.proc)
    piece = b"x" * 65536
    with socket.create_connection(("127.0.0.1", keyed.port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        closed = False
        try:
            for _ in range((4 << 30) // len(piece)):
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        except OSError:
            closed = True  # answered, then closed after a short drain: the body is never read whole
        status, body = read_response(s)
    assert closed
    assert status == 413 and json.loads(body)["error"]["code"] == "request_too_large"
    assert rss_mib(keyed.proc) - before < 32
    assert keyed.raw("GET", "/health")[0] == 200


def test_a_body_without_the_key_is_refused_before_it_is_read(keyed):
    # The body is announced but never sent: only a server that answers before reading it replies.
    for framing in (b"Content-Length: 1000000", b"Transfer-Encoding: chunked"):
        status, body = send_raw(keyed.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                b"Content-Type: application/json\r\n" + framing + b"\r\n\r\n", timeout=5)
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    status, body = send_raw(keyed.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100000000\r\n\r\n", timeout=5)
    assert status == 413


def test_host_and_origin_checks_stop_web_pages_not_curl(keyed):
    status, body = keyed.json("GET", "/v1/models", headers=authed({"Host": f"attacker.example:{keyed.port}"}))
    assert status == 403 and body["error"]["code"] == "invalid_host"
    for host in (f"localhost:{keyed.port}", f"127.0.0.1:{keyed.port}", f"[::1]:{keyed.port}", "LOCALHOST"):
        assert keyed.json("GET", "/v1/models", headers=authed({"Host": host}))[0] == 200, host
    # A page's simple POST (form or text/plain, no preflight) is refused; JSON needs a preflight.
    form = {"Origin": "http://attacker.example", "Content-Type": "text/plain"}
    status, body = keyed.json("POST", "/tokenize", {"content": "hi"}, headers=authed(form))
    assert status == 415 and body["error"]["code"] == "unsupported_content_type"
    origin_json = {"Origin": "http://attacker.example", "Content-Type": "application/json; charset=utf-8"}
    assert keyed.json("POST", "/tokenize", {"content": "hi"}, headers=authed(origin_json))[0] == 200
    # curl -d: form content type, no Origin.
    curl = {"Content-Type": "application/x-www-form-urlencoded"}
    assert keyed.json("POST", "/tokenize", {"content": "hi"}, headers=authed(curl))[0] == 200


def test_metrics_count_chat_requests_by_their_real_status(keyed):
    def count(status):
        _, text = keyed.raw("GET", "/metrics", headers=authed())
        line = f'dflash_requests_total{{endpoint="chat",status="{status}"}} '
        return sum(float(ln[len(line):]) for ln in text.splitlines() if ln.startswith(line))
    ok, bad = count(200), count(400)
    keyed.json("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 2}, headers=authed())
    keyed.raw("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 2, "stream": True}, headers=authed())
    keyed.json("POST", "/v1/chat/completions", {"messages": "nope"}, headers=authed())
    assert count(200) == ok + 2 and count(400) == bad + 1
    assert count(-1) == 0


def test_diagnostics_summary_has_the_config_and_policy_counters(keyed):
    keyed.json("POST", "/v1/completions", {"prompt": "def f(x):", "max_tokens": 24, "ignore_eos": True}, headers=authed())
    runs = [p for p in keyed.diag.iterdir() if p.is_dir()]
    assert len(runs) == 1  # one timestamped folder per server run
    summary = json.loads((runs[0] / "summary.json").read_text())
    config = summary["config"]
    for k in ("block_size", "spec_policy", "draft_window", "draft_sink", "target_quant", "draft_quant", "kv_type",
              "threads", "context"):
        assert k in config, k
    assert config["threads"] == 1 and config["context"] == 512
    for k in ("cycles", "verified_rows", "verified_rows_per_cycle", "plain_steps", "fallbacks", "probes",
              "draft_ms", "verify_ms", "steps", "experts_per_step", "experts_per_verify"):
        assert k in summary, k
    # A dense target reads no routed experts (MoE targets: tests/moe_test.cc counts them).
    assert summary["step_experts"] == 0 and summary["verify_experts"] == 0
    last = json.loads((runs[0] / "requests.jsonl").read_text().splitlines()[-1])
    spec = last["spec"]
    assert spec["cycles"] + spec["plain_steps"] > 0 and spec["verified_rows"] >= 2 * spec["cycles"]
    assert spec["draft_ms"] >= 0 and spec["verify_ms"] >= 0
    assert summary["cycles"] >= spec["cycles"]


def test_regenerating_with_saved_sequences_keeps_the_prefix():
    # 11 MiB holds two whole f32-cache sequences of this pair at --ctx 512 (as in test_serve.py).
    s = Server("--ctx", "512", "--parallel", "1", "--cache-ram", "11", "--kv-type", "f32")
    try:
        c = s.client()
        convs = [[{"role": "user", "content": f"def handler_{i}(request):"}] for i in range(3)]
        first = [c.chat.completions.create(model="m", messages=m, max_tokens=8, temperature=0) for m in convs]
        again = c.chat.completions.create(model="m", messages=convs[2], max_tokens=8, temperature=0)
        assert again.model_extra["timings"]["cache_n"] == first[2].usage.prompt_tokens - 1
        assert again.choices[0].message.content == first[2].choices[0].message.content
    finally:
        s.stop()


@pytest.fixture
def proxy(tmp_path):
    upstream = Upstream(tau=2.0)
    port = free_port()
    trace = tmp_path / "trace"
    proc = subprocess.Popen([BIN, "trace", "record", "--upstream", upstream.url, "--port", str(port),
                             "--out", str(trace), "--api-key", KEY], stderr=subprocess.PIPE)
    wait_for_port(port, proc)
    yield port, trace, upstream, proc
    proc.terminate()
    proc.wait(timeout=10)
    upstream.close()


def test_trace_record_survives_invalid_utf8(proxy):
    port, trace, upstream, proc = proxy
    auth = b"Authorization: Bearer " + KEY.encode() + b"\r\n"
    body = b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}'
    send_raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
             b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    send_raw(port, b"GET /%FF\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"\r\n")
    deadline = time.time() + 10
    while len(list(trace.glob("*.json"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()
    files = sorted(trace.glob("*.json"))
    assert len(files) == 2 and not list(trace.glob("*.tmp"))
    records = [json.loads(f.read_text()) for f in files]
    assert "\ufffd" in records[0]["request_text"] and "\ufffd" in records[1]["path"]


def test_trace_record_requires_its_key_from_clients(proxy):
    port, trace, upstream, proc = proxy
    body = json.dumps({"messages": USER}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n" % len(body))
    status, text = send_raw(port, request + b"\r\n" + body)
    assert status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key"
    status, _ = send_raw(port, request + b"Authorization: Bearer wrong\r\n\r\n" + body)
    assert status == 401
    assert upstream.bodies == []  # nothing was forwarded
    status, _ = send_raw(port, request + b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n" + body)
    assert status == 200 and len(upstream.bodies) == 1
