#!/usr/bin/env bash
# Benchmark: wall time of `dsinfra plan` from process start to exit, no network, for the
# CosmoFlow example at 4 nodes and scaled to 64 nodes. Goal (issue 2): < 150 ms at 64 nodes.
# Uses hyperfine (installed with apt if missing); writes target/bench/plan.md.
#
# DSINFRA_BIN=path uses a built binary instead of building the release one. SMOKE=1 runs each
# command twice without warm-up into target/bench/plan-smoke.md: what CI runs
# (scripts/bench-smoke.sh) so that the benchmark cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hyperfine >/dev/null; then
  echo "bench-plan: installing hyperfine with apt-get" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=(); else sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null
fi

bin="${DSINFRA_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --locked --quiet
  bin="${CARGO_TARGET_DIR:-$PWD/target}/release/dsinfra"
fi
report="plan.md"
runs=(--warmup 3 --runs 30)
if [ "${SMOKE:-0}" = 1 ]; then
  report="plan-smoke.md"
  runs=(--warmup 0 --runs 2)
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r examples/keys "$work/keys"
for nodes in 4 64; do
  sed -E "s/^([[:space:]]*count[[:space:]]*=[[:space:]]*)[0-9]+/\1$nodes/" examples/nd40-beeond.hcl \
    >"$work/cluster-$nodes.hcl"
  grep -qE "count += $nodes" "$work/cluster-$nodes.hcl" || {
    echo "bench-plan: could not set the node count to $nodes in the example" >&2
    exit 1
  }
done
# Sanity: the 64-node plan really plans 64 VMs.
if ! plan=$("$bin" plan "$work/cluster-64.hcl" --json --color never 2>"$work/plan.err"); then
  echo "bench-plan: dsinfra plan failed:" >&2
  cat "$work/plan.err" >&2
  exit 1
fi
vms=$(printf '%s' "$plan" | grep -o '"Microsoft.Compute/virtualMachines"' | wc -l)
[ "$vms" -eq 64 ] || { echo "bench-plan: expected 64 VMs in the plan, got $vms" >&2; exit 1; }

mkdir -p target/bench
hyperfine "${runs[@]}" --export-markdown "target/bench/$report" --style basic \
  -n "plan, 4 nodes" "$bin plan $work/cluster-4.hcl --color never" \
  -n "plan, 64 nodes" "$bin plan $work/cluster-64.hcl --color never" \
  -n "plan --json, 64 nodes" "$bin plan $work/cluster-64.hcl --json --color never"
{
  echo
  echo "Machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%d). Goal: 64-node plan < 150 ms."
} >>"target/bench/$report"
cat "target/bench/$report"
