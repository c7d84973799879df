#!/usr/bin/env python3
"""TTFT of a repeated long prompt: cold, warm from the RAM prefix cache, and warm from the disk
tier after a restart, in one run (issue 37's benchmark).

    .venv/bin/python bench/ttft_disk.py [--tokens 4000] [--repeats 3] [-m TARGET -d DRAFT]

Each repeat starts a server on an empty --cache-dir, streams the prompt once (cold), again
(warm, RAM), stops it (the sequence is written at shutdown), starts a second server on the same
directory and streams the prompt again (warm, disk). TTFT is measured by the client: request
sent to the first streamed token, so the disk tier's load is included. Prints a Markdown table
with the median of each and the ratios to cold.
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Server:
    def __init__(self, binary, target, draft, cache_dir, ctx, threads):
        cmd = [binary, "serve", "-m", target, "-d", draft, "--port", "0", "--ctx", str(ctx),
               "--cache-dir", cache_dir, "--cache-disk", "4096"]
        if threads:
            cmd += ["--threads", str(threads)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.port = None
        for line in self.proc.stderr:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            raise RuntimeError("server did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def post(self, path, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = json.loads(r.read())
        conn.close()
        return data

    def ttft(self, prompt):
        """Seconds from sending the request to the first streamed token, and the cached tokens."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        body = {"prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}
        start = time.perf_counter()
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        first, cached = None, None
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if first is None and event.get("choices") and event["choices"][0].get("text"):
                first = time.perf_counter() - start
            if event.get("usage"):
                cached = event["usage"]["prompt_tokens_details"]["cached_tokens"]
        conn.close()
        return first, cached

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin" / "dflash"))
    ap.add_argument("-m", "--target", default=str(ROOT / "models" / "dflash-pair" / "target"))
    ap.add_argument("-d", "--draft", default=str(ROOT / "models" / "dflash-pair" / "draft"))
    ap.add_argument("--tokens", type=int, default=4000, help="prompt length to aim for")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    rows = {"cold": [], "warm, RAM": [], "warm, disk after restart": []}
    cached = {}
    prompt = None
    for rep in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache_dir:
            a = Server(args.bin, args.target, args.draft, cache_dir, args.tokens + 512, args.threads)
            if prompt is None:
                unit = "".join(f"def step_{i}(state):\n    return state * {i} + {i * 7} % 13\n\n" for i in range(20))
                per_unit = len(a.post("/tokenize", {"content": unit})["tokens"])
                prompt = unit * max(1, args.tokens // per_unit)
                n = len(a.post("/tokenize", {"content": "# run 0\n" + prompt})["tokens"])
                print(f"prompt: {n} tokens")
            # A salt per repeat keeps the disk file of one repeat from serving the next.
            p = f"# run {rep}\n" + prompt
            for name in ("cold", "warm, RAM"):
                t, c = a.ttft(p)
                rows[name].append(t)
                cached[name] = c
            a.stop()
            files = list(Path(cache_dir).glob("*.dfseq"))
            b = Server(args.bin, args.target, args.draft, cache_dir, args.tokens + 512, args.threads)
            t, c = b.ttft(p)
            rows["warm, disk after restart"].append(t)
            cached["warm, disk after restart"] = c
            b.stop()
            size = sum(f.stat().st_size for f in files)
    cold = statistics.median(rows["cold"])
    print(f"saved sequence: {size / 2**20:.1f} MiB on disk")
    print("| prompt | TTFT (median of %d) | vs cold | cached tokens |" % args.repeats)
    print("|---|---|---|---|")
    for name, ts in rows.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1000:.0f} ms | {cold / m:.1f}x | {cached[name]} |")
    print("all runs (s):", json.dumps({k: [round(x, 3) for x in v] for k, v in rows.items()}))


if __name__ == "__main__":
    main()
