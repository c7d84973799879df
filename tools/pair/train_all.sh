#!/usr/bin/env bash
# Retrain the shipped pair from scratch: corpus -> tokenizer -> target -> generated data -> draft -> tau.
# Every step resumes (trainers from tools/pair/work/*_ckpt.pt, gen_data.py from work/gen_shards/),
# so rerunning after an interruption continues; delete tools/pair/work/ to start over.
# The draft is trained in two stages, as the shipped one was: 1800 steps on 1024 generated
# sequences (seed 2), then 250 steps at a lower lr on 7424 fresh ones (seed 1).
#   PY=/path/to/.venv-ref/bin/python tools/pair/train_all.sh
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../../.venv-ref/bin/python}
run() { nice -n 19 "$PY" "$@"; }
# Two one-thread decoders share the cores; the last call finds every shard and writes the .npz.
gen() { run gen_data.py "$@" --part 0/2 & run gen_data.py "$@" --part 1/2; wait; run gen_data.py "$@"; }
mkdir -p work
run corpus.py
run train_tokenizer.py
run train_target.py --steps 1200 --batch 16 --warmup 60 --eval-every 200 2>&1 | tee work/target.log
gen --sequences 1024 --seed 2 --out work/gen_stage1.npz 2>&1 | tee work/gen_stage1.log
gen --sequences 7424 --seed 1 --out work/gen.npz 2>&1 | tee work/gen.log
run train_draft.py --data work/gen_stage1.npz --steps 1800 --eval-every 300 --out work/draft_stage1 \
    --run-name draft_stage1 2>&1 | tee work/draft_stage1.log
run train_draft.py --init work/draft_stage1 --steps 250 --lr 3e-4 --warmup 10 --eval-every 125 \
    2>&1 | tee work/draft.log
run eval_tau.py 2>&1 | tee work/eval.log
