#!/usr/bin/env bash
# Sampled DFlash on the shipped pair (issue 33's benchmark): T 0.8 and 1.0, with top-p 0.95 and
# without, each under --spec-sampling reproducible and rejection. Every row is one `dflash bench`
# (plain and DFlash interleaved on the same prompts, so its speedup is a within-run ratio); the
# script prints a markdown table of tau (tokens per cycle), acceptance, both speeds and
# DFlash/plain, with the load average before and after.
#
# usage: bench/sampling_table.sh [DFLASH_BINARY]
#   PAIR, PROMPTS, TOKENS, REPEATS, THREADS, POLICY override the defaults below.
set -euo pipefail

cd "$(dirname "$0")/.."
DFLASH=${1:-build/bin/dflash}
PAIR=${PAIR:-models/dflash-pair}
PROMPTS=${PROMPTS:-bench/prompts/pair-heldout.jsonl}
TOKENS=${TOKENS:-128}
REPEATS=${REPEATS:-2}
THREADS=${THREADS:-2}
POLICY=${POLICY:-always}

[[ -x "$DFLASH" ]] || { echo "sampling_table.sh: $DFLASH: not an executable" >&2; exit 2; }
[[ -d "$PAIR/target" && -d "$PAIR/draft" ]] || { echo "sampling_table.sh: $PAIR: no target/ and draft/" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "load before: $(uptime)"
echo "$DFLASH bench -m $PAIR/target -d $PAIR/draft --prompts $PROMPTS -n $TOKENS --no-eos" \
     "--repeats $REPEATS -t $THREADS --spec-policy $POLICY --seed 1 --temp T [--top-p 0.95] --spec-sampling RULE"
echo
echo "| T | top-p | rule | tau | acceptance | plain tok/s | DFlash tok/s | DFlash/plain |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for temp in 0.8 1.0; do
  for top_p in 0.95 1.0; do
    for rule in reproducible rejection; do
      json="$out/$temp-$top_p-$rule.json"
      "$DFLASH" bench -m "$PAIR/target" -d "$PAIR/draft" --prompts "$PROMPTS" -n "$TOKENS" --no-eos \
          --repeats "$REPEATS" -t "$THREADS" --spec-policy "$POLICY" --seed 1 \
          --temp "$temp" --top-p "$top_p" --spec-sampling "$rule" --json "$json" >/dev/null
      python3 - "$json" "$temp" "$top_p" "$rule" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["mean"]
top_p = "off" if float(sys.argv[3]) >= 1 else sys.argv[3]
print(f"| {sys.argv[2]} | {top_p} | {sys.argv[4]} | {m['tau']:.2f} | {m.get('acceptance', 0):.3f} | "
      f"{m['plain_decode_tok_s']:.0f} | {m['dflash_decode_tok_s']:.0f} | {m['speedup']:.2f}x |")
PY
    done
  done
done
echo
echo "load after: $(uptime)"
