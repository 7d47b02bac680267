#!/usr/bin/env bash
# Runs each fuzz target for a bounded time (default 30 s each; FUZZ_SECONDS to change) from the
# committed seeds: fuzz/corpus/cel, and the repository's own inputs for the loader (examples/,
# tests/check, tests/bad-input, tests/scenarios) and for the trace reader (tests/sim). New inputs
# the fuzzer finds go to a scratch corpus under fuzz/target, never into the repository. Needs a
# nightly toolchain and cargo-fuzz (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: a nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
run() {
  local target="$1"; shift
  local scratch="fuzz/target/corpus/$target"
  mkdir -p "$scratch"
  echo "== fuzz $target (${seconds} s)"
  cargo +nightly fuzz run --fuzz-dir fuzz "$target" "$scratch" "$@" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=65536 -print_final_stats=1
}
run load examples tests/check tests/bad-input tests/scenarios
run cel fuzz/corpus/cel
run trace tests/sim
