#!/usr/bin/env bash
# Every benchmark in its smoke mode (seconds each), so that a benchmark that breaks fails CI
# (`.ci/run` runs this after the tests; issue 32). The numbers it writes (target/bench/*-smoke.md
# and target/bench/shard.md) mean nothing: a debug build on a busy machine. The real runs are
# scripts/bench-plan.sh, scripts/bench-apply.sh, scripts/bench-refresh.sh, scripts/bench-ssh.sh
# and `cargo bench`. (The refresh smoke still holds its ARM-call and 429 goals: they are counts.)
#
#   scripts/bench-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# A bench script nothing here runs would rot unnoticed: each must be named below, or in the bench
# script that runs it.
for script in scripts/bench-*.sh; do
  case "$script" in scripts/bench-smoke.sh | scripts/bench-lib.sh) continue ;; esac
  grep -q "bash $script" "$0" scripts/bench-*.sh || {
    echo "bench-smoke: $script has no smoke run here; add one (SMOKE=1)" >&2
    exit 1
  }
done
# And each `cargo bench` target, here or in the script that runs it.
for target in benches/*.rs; do
  name="$(basename "$target" .rs)"
  grep -q -- "--bench $name" "$0" scripts/bench-*.sh || {
    echo "bench-smoke: benches/$name.rs has no smoke run; add one here" >&2
    exit 1
  }
done

cargo build --locked --quiet
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/dsinfra"
step() {
  echo "bench-smoke: $1" >&2
}
step "plan (scripts/bench-plan.sh)"
DSINFRA_BIN="$bin" SMOKE=1 bash scripts/bench-plan.sh >/dev/null
step "apply and refresh (scripts/bench-apply.sh, which runs scripts/bench-refresh.sh)"
DSINFRA_BIN="$bin" SMOKE=1 bash scripts/bench-apply.sh >/dev/null
# The cargo benches run in the dev profile (as `cargo test` builds them), with the smallest
# arguments: their code and their report, not their speed.
step "shard balance (benches/shard_balance.rs)"
cargo test --locked --quiet --bench shard_balance >/dev/null
step "ssh fan-out (scripts/bench-ssh.sh: 1 and 2 sshd hosts, dsinfra and OpenSSH only)"
SMOKE=1 bash scripts/bench-ssh.sh >/dev/null
step "every benchmark ran"
