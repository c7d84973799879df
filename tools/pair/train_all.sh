#!/usr/bin/env bash
# Retrain the shipped pair from scratch: corpus -> tokenizer -> target -> generated data -> draft -> tau.
# v1 (target + first draft) takes about 70 minutes on 2 idle CPU cores (AMX bf16); the draft v2
# stages (more generated data, greedy-only continued training) about 2.5 hours more. Every step resumes (trainers from
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
# Draft v2: the same shards extended to 7424 sequences (the first 1024 are the ones above), then
# four greedy-only stages, each starting from the last (models/dflash-pair/README.md, "Draft v2").
gen --sequences 7424 2>&1 | tee work/gen2.log
stage() { run train_draft.py --greedy-only --init "$1" --steps "$2" --lr "$3" --warmup "$4" --eval-every "$5" \
            --run-name "$6" --out "$7" 2>&1 | tee "work/$6.log"; }
stage ../../models/dflash-pair/draft 2400 6e-4 50 400 draft_g work/draft_g
stage work/draft_g 2400 4e-4 30 400 draft_g2 work/draft_g2
stage work/draft_g2 2000 3e-4 20 500 draft_g3 work/draft_g3
stage work/draft_g3 2400 3e-4 20 600 draft_g4 ../../models/dflash-pair/draft
run eval_tau.py 2>&1 | tee work/eval.log
