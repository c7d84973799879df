#!/usr/bin/env bash
# Decode speed on a busy machine (issue 35, "Busy machine"): starts one CPU-bound competitor
# per core, decodes the shipped pair plainly with -t 1 and -t 2 interleaved (so both see the
# same load), ends the competitors and prints decode tok/s per run and the ratio of medians
# t2/t1 (goal: >= 0.9, i.e. extra threads never cost more than they bring).
#
# usage: bench/busy_machine.sh [DFLASH_BINARY] [ROUNDS]
#   defaults: build/bin/dflash, 3 rounds; MODEL, TOKENS, COMPETITORS override the rest.
set -euo pipefail

cd "$(dirname "$0")/.."
DFLASH=${1:-build/bin/dflash}
ROUNDS=${2:-3}
MODEL=${MODEL:-models/dflash-pair/target}
TOKENS=${TOKENS:-128}
COMPETITORS=${COMPETITORS:-$(nproc)}

[[ -x "$DFLASH" ]] || { echo "busy_machine.sh: $DFLASH: not an executable" >&2; exit 2; }
[[ -d "$MODEL" ]] || { echo "busy_machine.sh: $MODEL: not a directory" >&2; exit 2; }

pids=()
stop_competitors() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap stop_competitors EXIT

# Prints the decode tok/s of one plain greedy run with $1 threads.
decode_tok_s() {
  "$DFLASH" generate -m "$MODEL" --mode ar -n "$TOKENS" --no-eos -t "$1" \
      -p "The quick brown fox jumps over the lazy dog" --json |
    python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["decode_tok_s"])'
}

echo "load before: $(uptime)"
for ((i = 0; i < COMPETITORS; ++i)); do
  # A pure CPU loop in the shell itself: no I/O, so it competes only for the core.
  bash -c 'while :; do :; done' &
  pids+=($!)
done
sleep 1  # let the scheduler spread the competitors over the cores
echo "competitors: $COMPETITORS busy loops; load: $(uptime)"

t1=()
t2=()
printf '%-6s %10s %10s\n' round "t1 tok/s" "t2 tok/s"
for ((r = 1; r <= ROUNDS; ++r)); do
  a=$(decode_tok_s 1)
  b=$(decode_tok_s 2)
  t1+=("$a")
  t2+=("$b")
  printf '%-6s %10s %10s\n' "$r" "$a" "$b"
done
echo "load after: $(uptime)"
stop_competitors

python3 - "${t1[*]}" "${t2[*]}" <<'EOF'
import statistics, sys
t1 = [float(x) for x in sys.argv[1].split()]
t2 = [float(x) for x in sys.argv[2].split()]
m1, m2 = statistics.median(t1), statistics.median(t2)
print(f"median t1 {m1:.1f} tok/s, t2 {m2:.1f} tok/s, t2/t1 {m2 / m1:.2f} (goal >= 0.9)")
EOF
