#!/usr/bin/env bash
# Runs the fuzz targets of a DFLASH_FUZZ build (`make fuzz`, `make fuzz-long`; docs/fuzzing.md).
#   fuzz/run.sh BUILD_DIR SECONDS fresh|keep [TARGET...]
# For each target (default: every fuzz/*_fuzz.cc): first each file of fuzz/repro/TARGET once,
# then SECONDS of fuzzing from fuzz/corpus/TARGET with a fixed seed. New inputs go to
# BUILD_DIR/fuzz-corpus/TARGET (emptied first with `fresh`, so a short run starts from the
# committed seeds alone; kept with `keep`), crashes to BUILD_DIR/fuzz-crashes/TARGET/, logs to
# BUILD_DIR/fuzz-logs/. Every target runs even after a failure; the exit status says if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 seconds=$2 mode=$3
shift 3
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cc; do t=${f#fuzz/}; targets+=("${t%_fuzz.cc}"); done
fi
# A clean error or a rendered result must come back within 20 s and 2 GB, else it is a finding.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=20)
logs=$build/fuzz-logs
mkdir -p "$logs"
failed=()

fail() {  # fail NAME LOG: remember it and show the end of its log
  failed+=("$1")
  echo "FAILED: $1 (log: $2)"
  grep -m1 -A12 -E "ERROR: |runtime error|==ERROR|Test unit written|uncaught exception" "$2" || tail -20 "$2"
}

for t in "${targets[@]}"; do
  bin=$build/bin/${t}_fuzz
  for repro in fuzz/repro/"$t"/*; do
    [ -e "$repro" ] || continue
    log=$logs/$t.repro.$(basename "$repro").log
    if "$bin" "${limits[@]}" "$repro" >"$log" 2>&1; then echo "ok: $repro"; else fail "$repro" "$log"; fi
  done
  corpus=$build/fuzz-corpus/$t crashes=$build/fuzz-crashes/$t/
  [ "$mode" = fresh ] && rm -rf "$corpus"
  mkdir -p "$corpus" "$crashes"
  log=$logs/$t.log
  start=$SECONDS
  if "$bin" "${limits[@]}" -seed=1 -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$crashes" "$corpus" "fuzz/corpus/$t" >"$log" 2>&1; then
    echo "ok: $t fuzzed ${seconds}s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') inputs, $((SECONDS - start))s)"
  else
    fail "$t" "$log"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets clean"
