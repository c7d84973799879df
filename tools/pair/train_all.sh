#!/usr/bin/env bash
# Retrain the shipped pair from scratch: corpus -> tokenizer -> target -> generated data -> draft -> tau.
# About 70 minutes on 2 idle CPU cores (AMX bf16). Every step resumes (trainers from
# tools/pair/work/*_ckpt.pt, gen_data.py from work/gen_shards/), so rerunning after an interruption
# continues; delete tools/pair/work/ to start over.
#   PY=/path/to/.venv-ref/bin/python tools/pair/train_all.sh
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../../.venv-ref/bin/python}
run() { nice -n 19 "$PY" "$@"; }
# Two one-thread decoders share the cores; the last call finds every shard and writes work/gen.npz.
gen() { run gen_data.py "$@" --part 0/2 & run gen_data.py "$@" --part 1/2; wait; run gen_data.py "$@"; }
mkdir -p work
run corpus.py
run train_tokenizer.py
run train_target.py --steps 1200 --batch 16 --warmup 60 --eval-every 200 2>&1 | tee work/target.log
gen --sequences 1024 2>&1 | tee work/gen.log
run train_draft.py --steps 1800 --eval-every 300 2>&1 | tee work/draft.log
run eval_tau.py 2>&1 | tee work/eval.log
