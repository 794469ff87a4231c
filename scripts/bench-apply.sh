#!/usr/bin/env bash
# Benchmark: how close `dsinfra apply` comes to the critical path of the dependency graph.
#
# A `dsinfra emulator` at latency scale 0.01 plays ARM (its latency model: NSG 3 s, VNet 5 s,
# NIC 2 s, VM 90 s, ND-series VM 300 s, storage account 20 s; resource group, placement group,
# containers and schedules are synchronous). The critical path is measured, not assumed: after
# each apply the script takes every resource's dependencies from dsinfra's state and the
# modelled duration of its create from the emulator's own operation records (due - started, so
# already at the emulator's scale), and finds the longest chain. For these manifests that is
# RG -> NSG -> VNet -> NIC -> VM: 100 s (310 s for ND VMs) times 0.01. Round trips, state saves
# and polls are not in it: they are what the ratio measures. The makespan is the engine's walk,
# as the engine logs it (to the microsecond; the summary line rounds it to 10 ms).
#
# Scenarios: the CosmoFlow seed (4 x ND40rs_v2), and a synthetic cluster of 4 and of 64
# Standard_D4s_v5 nodes, each with the default --parallelism 64 and with --parallelism 10
# (Terraform's default number; but dsinfra's bounds ARM requests in flight, Terraform's whole
# resource operations: docs/decisions.md, entry 15, and the operation-bounded figures in
# docs/engine.md, "Makespan"); and 256 nodes at --parallelism 64 (the emulator's vCPU quota raised
# for it). Peak memory (max RSS, /usr/bin/time -v) of every apply. Goals (issues 4 and 32):
# makespan / critical path <= 1.05; RSS near 26 MB at 64 nodes, < 64 MB at 256. Writes
# target/bench/apply.md. Needs jq, curl and GNU time (installed with apt-get when missing).
#
# RUNS=n passes per scenario (default 3; the row shows the median and the range). DSINFRA_BIN=path
# uses a built binary instead of building the release one. SMOKE=1 runs one pass of one
# scenario of each kind, at --parallelism 64 only, into target/bench/apply-smoke.md: what CI runs
# (scripts/bench-smoke.sh) so that a scenario that breaks fails CI. Then the refresh scenario
# (scripts/bench-refresh.sh; see the end).
set -euo pipefail
cd "$(dirname "$0")/.."

bench="bench-apply"
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
ensure_tools time jq curl

bin="${DSINFRA_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --locked --quiet
  bin="${CARGO_TARGET_DIR:-$PWD/target}/release/dsinfra"
fi
scale=0.01
work="$(mktemp -d)"
cloud_root="$work"
emulator_pid=""
cleanup() {
  if [ -n "$emulator_pid" ]; then kill "$emulator_pid" 2>/dev/null || true; fi
  rm -rf "$work"
  if [ "$cloud_root" != "$work" ]; then rm -rf "$cloud_root"; fi
}
trap cleanup EXIT

# A fresh emulator per run: each measurement starts with full rate-limit buckets. Its cloud is
# kept in memory only (`--in-memory`): with a state dir the emulator writes its whole cloud after
# changes, a cost of the test double, not of ARM's latency model, that competes with dsinfra for
# the same cores. Its operation records are read from the admin API (`GET /_emulator/operations`)
# before it stops. dsinfra's own state stays on disk, next to the manifest: that cost is measured.
cloud_root="$work"
# Throttling is off by default (THROTTLE=1 keeps it on): the emulator's buckets refill on its
# compressed clock, so a 64-node apply polling at scale 0.01 stays within ARM's budget, but the
# benchmark measures the engine's walk, and the throttling path is tested on its own
# (tests/apply.rs, 429 storm).
throttle="--no-throttle"
if [ "${THROTTLE:-0}" = 1 ]; then throttle=""; fi
# The 256-node scenario needs 1,024 vCPUs of the D-series family (the default quota is 1,000).
emulator_flags=(--vcpu-quota 4096)
if [ -n "$throttle" ]; then emulator_flags+=("$throttle"); fi
if [ -d /dev/shm ] && [ -w /dev/shm ]; then cloud_root="$(mktemp -d /dev/shm/dsinfra-bench.XXXXXX)"; fi
export DSINFRA_EMULATOR_LATENCY_SCALE="$scale" NO_COLOR=1
unset AZURE_SUBSCRIPTION_ID

# The walk's duration in seconds, to the microsecond: the engine's one info event per run
# (`walk finished and state flushed elapsed_us=...`) in the apply's log file. The summary line
# says the same to 10 ms only, 1% of a scaled critical path. LOG is the log file.
seconds() {
  local us
  grep -q 'complete: ' || { echo "bench-apply: the apply did not complete" >&2; return 1; }
  us="$(grep -oE 'elapsed_us=[0-9]+' "$1" | tail -n1 | cut -d= -f2)"
  [ -n "$us" ] || { echo "bench-apply: no walk duration in $1" >&2; return 1; }
  awk -v us="$us" 'BEGIN { printf "%.3f", us / 1e6 }'
}

# critical_path STATE CLOUD: the longest dependency chain of the applied resources, each weighted
# by the emulator's modelled duration of its create (seconds, at the emulator's scale). STATE is
# dsinfra's state (addresses, ids, dependencies); CLOUD the emulator's operation records.
critical_path() {
  jq -n --slurpfile state "$1" --slurpfile cloud "$2" '
    # RFC 3339 with nanoseconds -> seconds since the epoch.
    def secs: capture("^(?<s>[^.Z]+)(?<f>\\.[0-9]+)?Z$")
      | ((.s + "Z") | fromdateiso8601) + (("0" + (.f // ".0")) | tonumber);
    ([$cloud[0].operations[] | select(.kind == "Put")
      | {key: .target, value: ((.due | secs) - (.started | secs))}] | from_entries) as $took
    | ([$state[0].resources[]
        | {key: .address,
           value: {deps: (.depends_on // []), took: ($took[(.id // "") | ascii_downcase] // 0)}}]
       | from_entries) as $graph
    | def chain($a): $graph[$a] as $n
        | if $n == null then 0 else $n.took + ([$n.deps[] | chain(.)] | max // 0) end;
      [$graph | keys[] | chain(.)] | max' | awk '{ printf "%.2f", $1 }'
}

# manifest NAME NODES SIZE IMAGE: the CosmoFlow seed with its own experiment name and node count
# for its own size (ND40rs_v2: InfiniBand and a temp disk, what its mofed and beeond steps need);
# for another size, the same cluster in the same region without the seed's steps and storage
# (bench-lib.sh), as validation rightly refuses MOFED without InfiniBand and BeeOND without a temp
# disk. The graph's longest chain is the same either way: RG -> NSG -> VNet -> NIC -> VM.
manifest() {
  if [ "$3" != Standard_ND40rs_v2 ]; then
    plain_cluster "$@"
    return
  fi
  local dir="$work/$1"
  mkdir -p "$dir"
  cp -r examples/keys "$dir/keys"
  sed -E -e "s/^experiment = .*/experiment = \"$1\"/" \
    -e "s/^([[:space:]]*count[[:space:]]*=[[:space:]]*)[0-9]+/\1$2/" \
    -e "s/hpc-ubuntu-22.04/$4/" \
    examples/nd40-beeond.hcl >"$dir/exp.hcl"
  echo "$dir/exp.hcl"
}

rows=()
# once NAME NODES SIZE IMAGE EXPECTED_CHAIN PARALLELISM: one apply into a fresh directory and a
# fresh emulator; prints "makespan critical_path rss_kb".
once() {
  local file out secs cp expected log rss_kb
  file="$(manifest "$1" "$2" "$3" "$4")"
  start_emulator "$cloud_root/cloud-$1"
  # Info level only: the walk's duration, and nothing per request or per resource.
  log="$work/$1.log"
  # A failed apply says why (its stderr and the end of its output), never a bare exit 1.
  local err="$work/$1.err" status=0
  out="$(DSINFRA_LOG=dsinfra=info /usr/bin/time -v -o "$work/time.txt" "$bin" --log-file "$log" apply "$file" --endpoint "$endpoint" --auto-approve --parallelism "$6" 2>"$err")" || status=$?
  rss_kb="$(grep 'Maximum resident set size' "$work/time.txt" | grep -oE '[0-9]+$' || true)"
  if [ "$status" != 0 ]; then
    echo "bench-apply: $1 at --parallelism $6: dsinfra apply failed (exit $status):" >&2
    cat "$err" >&2
    printf '%s\n' "$out" | tail -n 20 >&2
    exit 1
  fi
  secs="$(printf '%s\n' "$out" | seconds "$log")"
  curl -sf "$endpoint/_emulator/operations" >"$cloud_root/cloud-$1/operations.json"
  stop_emulator
  cp="$(critical_path "$(dirname "$file")/.dsinfra/exp/state.json" "$cloud_root/cloud-$1/operations.json")"
  # The measured chain must be the one the latency model predicts: a different one means the
  # graph or the model changed, and the table would compare against the wrong thing.
  expected="$(awk -v c="$5" -v s="$scale" 'BEGIN { printf "%.2f", c * s }')"
  if [ "$cp" != "$expected" ]; then
    echo "bench-apply: $1: measured critical path ${cp}s, the latency model says ${expected}s" >&2
    exit 1
  fi
  echo "$secs $cp $rss_kb"
}

# run NAME NODES SIZE IMAGE EXPECTED_CHAIN PARALLELISM: RUNS passes (default 3, 1 in smoke mode),
# each its own apply; the row shows the median ratio, the range, and the largest peak RSS.
runs="${RUNS:-3}"
if [ "${SMOKE:-0}" = 1 ]; then runs=1; fi
run() {
  local pass secs cp rss ratios=() most=0 median range
  for pass in $(seq "$runs"); do
    read -r secs cp rss <<<"$(once "$1-p$6-r$pass" "$2" "$3" "$4" "$5" "$6")"
    ratios+=("$(awk -v m="$secs" -v c="$cp" 'BEGIN { printf "%.3f", m / c }')")
    if [ "$rss" -gt "$most" ]; then most="$rss"; fi
  done
  mapfile -t ratios < <(printf '%s\n' "${ratios[@]}" | sort -n)
  median="${ratios[$((runs / 2))]}"
  range="${ratios[0]}-${ratios[$((runs - 1))]}"
  rows+=("| $1 | $2 | $6 | $cp | $median | $range | $((most / 1024)) |")
}

if [ "${SMOKE:-0}" = 1 ]; then
  # Smoke mode (CI): one small scenario of each kind, so a scenario that breaks fails CI; the
  # numbers mean nothing on a busy machine and a debug build.
  run seed-nd40 4 Standard_ND40rs_v2 hpc-ubuntu-22.04 310 64
  run d4s-4 4 Standard_D4s_v5 ubuntu-22.04 100 64
else
  run seed-nd40 4 Standard_ND40rs_v2 hpc-ubuntu-22.04 310 64
  run seed-nd40 4 Standard_ND40rs_v2 hpc-ubuntu-22.04 310 10
  run d4s-4 4 Standard_D4s_v5 ubuntu-22.04 100 64
  run d4s-4 4 Standard_D4s_v5 ubuntu-22.04 100 10
  run d4s-64 64 Standard_D4s_v5 ubuntu-22.04 100 64
  run d4s-64 64 Standard_D4s_v5 ubuntu-22.04 100 10
  run d4s-256 256 Standard_D4s_v5 ubuntu-22.04 100 64
fi

mkdir -p target/bench
report="apply.md"
if [ "${SMOKE:-0}" = 1 ]; then report="apply-smoke.md"; fi
{
  echo "# dsinfra apply: makespan vs critical path (emulator latency scale $scale)"
  echo
  echo "| scenario | nodes | --parallelism | critical path (s) | makespan / critical path, median of $runs | range | peak RSS (MB) |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Emulator: $( [ -n "$throttle" ] && echo 'throttling off (--no-throttle)' || echo 'throttling on' ); its cloud in memory (--in-memory)."
  echo
  echo "Peak RSS: the apply's maximum resident set size (/usr/bin/time -v)."
  echo
  echo "Binary: $bin. Machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%dT%H:%MZ)."
  echo "Goals: makespan / critical path <= 1.05; RSS near 26 MB at 64 nodes, < 64 MB at 256."
} >"target/bench/$report"
cat "target/bench/$report"

# The refresh scenario (issue 32): the ARM calls, 429s, wall time and memory of plan and status
# after applying 64, 256 and 512 nodes (4 in smoke mode), with the same binary, so one run of this
# script gives every number of docs/benchmarks.md's apply and refresh tables. Its report is
# target/bench/refresh.md (refresh-smoke.md); it fails, saying which, when a goal is missed.
DSINFRA_BIN="$bin" bash scripts/bench-refresh.sh
