#!/usr/bin/env python3
"""dflash side by side with llama.cpp on the same GGUF files, the same thread count, the same
prompt token ids and the same number of greedy tokens, measured in one run.

For each GGUF:
  ours              build/bin/dflash generate --mode ar --no-eos --json --kv-type f16 (llama.cpp's
                    default cache type): its own prefill and decode timers (GenerateStats)
  llama-cpp-python  the llama.cpp it compiled at install: prefill = one llama_decode of the
                    prompt, decode = one token per llama_decode, timed by llama.cpp's own perf
                    counters (llama_perf_context), greedy from the last logits
  --peer-cmd        any other binary, e.g. "llama-bench -m {model} -t {threads} -p {prompt}
                    -n {gen}"; it may print JSON with prefill_tok_s / decode_tok_s, a
                    llama-bench table (pp/tg rows), or llama.cpp's "prompt eval time" /
                    "eval time" perf lines
Each measurement is repeated (--repeats) and the best run is kept; the table gives tok/s and
the ratio ours / peer for prefill and decode.

--make-q4k SRC DST makes a Q4_K_M GGUF from a bf16/f16 one with llama.cpp's own quantiser
(llama_model_quantize), since the gguf package cannot write K-quants.

Run with a venv holding llama-cpp-python and numpy, e.g.
  .venv-llama/bin/python tools/compare_llamacpp.py --gguf a.gguf --gguf b.gguf --threads 2
"""
import argparse
import ctypes
import json
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def make_q4k(src, dst):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = 0
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize({src} -> {dst}) failed with {rc}")


def prompt_ids(n, vocab, seed):
    # Ordinary text-token ids (the low part of the vocabulary), fixed by the seed.
    return np.random.default_rng(seed).integers(100, min(vocab, 100000), size=n).tolist()


def run_ours(binary, model, ids, gen, threads):
    cmd = [str(binary), "generate", "-m", str(model), "--mode", "ar", "--no-eos", "--json",
           "-n", str(gen), "-t", str(threads), "-c", str(len(ids) + gen + 16),
           "--prefill-chunk", str(len(ids)), "--prompt-ids", ",".join(map(str, ids)),
           "--kv-type", "f16"]  # llama.cpp's default cache type: both engines read the same KV bytes
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["prefill_tok_s"], j["decode_tok_s"], j["tokens"]


class LlamaCpp:
    def __init__(self, model, n_ctx, threads, n_batch, extra_bufts):
        import llama_cpp
        import llama_cpp.llama_cpp as capi
        if not extra_bufts:  # Llama() offers no switch for it; its defaults come from here
            defaults = capi.llama_model_default_params

            def without_extra_bufts():
                p = defaults()
                p.use_extra_bufts = False
                return p
            capi.llama_model_default_params = without_extra_bufts
        self.lib = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                                   n_threads=threads, n_threads_batch=threads, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def run(self, ids, gen):
        lib, llm = self.lib, self.llm
        llm.reset()
        lib.llama_memory_clear(lib.llama_get_memory(llm.ctx), True)
        lib.llama_perf_context_reset(llm.ctx)
        llm.eval(ids)
        out = []
        for _ in range(gen):
            logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(llm.ctx, -1), shape=(self.n_vocab,))
            out.append(int(np.argmax(logits)))
            if len(out) < gen:
                llm.eval([out[-1]])
        perf = lib.llama_perf_context(llm.ctx)
        prefill = perf.n_p_eval / (perf.t_p_eval_ms / 1000) if perf.t_p_eval_ms > 0 else 0.0
        decode = perf.n_eval / (perf.t_eval_ms / 1000) if perf.t_eval_ms > 0 else 0.0
        return prefill, decode, out


def parse_peer(text, n_prompt, n_gen):
    for line in reversed(text.strip().splitlines()):
        try:
            j = json.loads(line)
            return float(j["prefill_tok_s"]), float(j["decode_tok_s"])
        except (ValueError, KeyError, TypeError):
            pass
    pp = re.search(rf"\|\s*pp{n_prompt}\s*\|\s*([\d.]+)", text)
    tg = re.search(rf"\|\s*tg{n_gen}\s*\|\s*([\d.]+)", text)
    if pp and tg:
        return float(pp.group(1)), float(tg.group(1))
    pe = re.search(r"prompt eval time\s*=.*?([\d.]+) tokens per second", text)
    ev = re.search(r"(?<!prompt )eval time\s*=.*?([\d.]+) tokens per second", text)
    if pe and ev:
        return float(pe.group(1)), float(ev.group(1))
    raise SystemExit("--peer-cmd printed neither JSON, a llama-bench table nor llama.cpp perf lines:\n" + text)


def run_peer(template, model, threads, n_prompt, n_gen):
    cmd = template.format(model=shlex.quote(str(model)), threads=threads, prompt=n_prompt, gen=n_gen)
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"--peer-cmd failed ({res.returncode}): {cmd}\n{res.stdout}{res.stderr}")
    return parse_peer(res.stdout + res.stderr, n_prompt, n_gen)


def best(runs):
    return max(r[0] for r in runs), max(r[1] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=pathlib.Path, action="append", default=[], help="model file (repeatable)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dflash", type=pathlib.Path, default=ROOT / "build/bin/dflash")
    ap.add_argument("--peer-cmd", help="shell template with {model} {threads} {prompt} {gen}")
    ap.add_argument("--peer-name", default="peer")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ap.add_argument("--llama-extra-bufts", action="store_true",
                    help="let llama.cpp use its extra CPU buffer types (AMX, repacked weights); off by "
                         "default because its AMX path crashed (SIGSEGV in llama_decode) on the VM measured")
    ap.add_argument("--make-q4k", nargs=2, type=pathlib.Path, metavar=("SRC", "DST"))
    args = ap.parse_args()
    if args.make_q4k:
        make_q4k(*args.make_q4k)
        if not args.gguf:
            return
    if not args.gguf:
        ap.error("give at least one --gguf")

    rows = []
    for model in args.gguf:
        llama = LlamaCpp(model, args.prompt_tokens + args.gen + 16, args.threads, max(args.prompt_tokens, 32),
                         args.llama_extra_bufts)
        ids = prompt_ids(args.prompt_tokens, llama.n_vocab, args.seed)
        theirs_runs, ours_runs = [], []
        for _ in range(args.repeats):  # interleaved, so both see the same machine load
            ours_runs.append(run_ours(args.dflash, model, ids, args.gen, args.threads))
            theirs_runs.append(llama.run(ids, args.gen))
        del llama
        row = {"model": model.name, "threads": args.threads, "prompt": args.prompt_tokens, "gen": args.gen,
               "ours": best(ours_runs), "llama-cpp-python": best(theirs_runs),
               "same_tokens": ours_runs[0][2] == theirs_runs[0][2]}
        if args.peer_cmd:
            row[args.peer_name] = best([run_peer(args.peer_cmd, model, args.threads, args.prompt_tokens, args.gen)
                                        for _ in range(args.repeats)])
        rows.append(row)

    peers = ["llama-cpp-python"] + ([args.peer_name] if args.peer_cmd else [])
    print(f"threads {args.threads}, prompt {args.prompt_tokens} tokens, {args.gen} greedy tokens, "
          f"best of {args.repeats}, llama.cpp extra buffer types {'on' if args.llama_extra_bufts else 'off'}; "
          f"tok/s (ratio = ours / peer)")
    head = "| model | phase | ours |" + "".join(f" {p} | ratio |" for p in peers)
    print(head)
    print("|" + "---|" * (3 + 2 * len(peers)))
    for r in rows:
        for i, phase in enumerate(("prefill", "decode")):
            cells = "".join(f" {r[p][i]:.1f} | {r[p][i] and r['ours'][i] / r[p][i]:.2f} |" for p in peers)
            print(f"| {r['model']} | {phase} | {r['ours'][i]:.1f} |{cells}")
    for r in rows:
        if not r["same_tokens"]:
            print(f"note: {r['model']}: greedy tokens differ between dflash and llama.cpp "
                  "(different kernels round differently; random weights have near-ties)", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
