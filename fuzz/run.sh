#!/usr/bin/env bash
# Runs each fuzz target from the committed seeds: fuzz/corpus/cel, and the repository's own inputs
# for the loader (examples/, tests/check, tests/bad-input, tests/scenarios) and for the trace
# reader (tests/sim). By default (what CI runs) a fixed number of inputs from a fixed seed, so that
# every run tries the same inputs: load 10,000, cel 500,000, trace 50,000, 60 s at most each.
# FUZZ_SECONDS=600 explores instead: that long per target, from a random seed. New inputs the
# fuzzer finds go to a scratch corpus under fuzz/target, never into the repository. Needs a
# nightly toolchain and cargo-fuzz (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: a nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
run() {
  local target="$1" runs="$2"; shift 2
  local scratch="fuzz/target/corpus/$target"
  local bound=(-seed=1 -runs="$runs" -max_total_time=60)
  if [ -n "$seconds" ]; then bound=(-max_total_time="$seconds"); fi
  rm -rf "$scratch" && mkdir -p "$scratch"
  echo "== fuzz $target (${bound[*]})"
  cargo +nightly fuzz run --fuzz-dir fuzz "$target" "$scratch" "$@" -- \
    "${bound[@]}" -rss_limit_mb=2048 -timeout=20 -max_len=65536 -print_final_stats=1
}
run load 10000 examples tests/check tests/bad-input tests/scenarios
run cel 500000 fuzz/corpus/cel
run trace 50000 tests/sim
