#!/usr/bin/env bash
# Benchmark: what reading Azure costs at scale (issue 32). For a cluster of 64, 256 and 512
# Standard_D4s_v5 nodes applied against `dsinfra emulator` (latency scale 0.001, its vCPU quota
# raised), the ARM calls, the 429s and the wall time of `dsinfra plan` and of `dsinfra status`,
# with ARM's throttling on: the apply runs unthrottled, then `PUT /_emulator/throttle` switches
# it on with every bucket full, as a plan on a quiet subscription finds them. The calls are
# counted by the emulator (`GET /_emulator/requests`), so a client's retries count too. Peak
# memory (max RSS, /usr/bin/time -v) of each command. Writes target/bench/refresh.md.
#
# Goals (issue 32): a refresh of 64 nodes in <= 16 ARM calls and of 512 in <= 24; no 429 at 512
# nodes; a plan of a 512-node state under 1 s. A goal missed fails the script, saying which.
#
# DSINFRA_BIN=path uses a built binary instead of building the release one. SMOKE=1 runs one
# cluster of 4 nodes into target/bench/refresh-smoke.md, without the goals' wall-time bound: what
# CI runs (scripts/bench-smoke.sh), so that the benchmark cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."

bench="bench-refresh"
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
ensure_tools time jq curl

bin="${DSINFRA_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --locked --quiet
  bin="${CARGO_TARGET_DIR:-$PWD/target}/release/dsinfra"
fi
# The commands run in each manifest's directory.
bin="$(realpath "$bin")"
scale=0.001
emulator_flags=(--no-throttle --vcpu-quota 4096)
work="$(mktemp -d)"
emulator_pid=""
trap 'stop_emulator; rm -rf "$work"' EXIT
export DSINFRA_EMULATOR_LATENCY_SCALE="$scale" NO_COLOR=1
unset AZURE_SUBSCRIPTION_ID

admin() { # METHOD ROUTE [BODY]
  curl -sf -X "$1" -H 'content-type: application/json' ${3:+--data "$3"} "$endpoint/_emulator/$2"
}

# measure NAME COMMAND...: runs one dsinfra command under /usr/bin/time against the emulator,
# counting the ARM requests it made. Prints "calls throttled seconds rss_mb".
measure() {
  local name="$1" status=0
  shift
  admin DELETE requests >/dev/null
  /usr/bin/time -v -o "$work/$name.time" "$bin" "$@" --endpoint "$endpoint" \
    >"$work/$name.out" 2>"$work/$name.err" || status=$?
  if [ "$status" != 0 ]; then
    echo "$bench: dsinfra $* failed (exit $status):" >&2
    cat "$work/$name.err" >&2
    tail -n 20 "$work/$name.out" >&2
    exit 1
  fi
  local tally wall rss
  tally="$(admin GET requests)"
  wall="$(grep 'Elapsed (wall clock)' "$work/$name.time" | grep -oE '[0-9:.]+$' |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.3f", s }')"
  rss="$(grep 'Maximum resident set size' "$work/$name.time" | grep -oE '[0-9]+$')"
  printf '%s %s %s %s\n' "$(jq '.total' <<<"$tally")" "$(jq '.byStatus["429"] // 0' <<<"$tally")" \
    "$wall" "$((rss / 1024))"
}

rows=()
failed=()
scenario() { # NODES
  local nodes="$1" file dir
  file="$(plain_cluster "refresh-$nodes" "$nodes" Standard_D4s_v5 ubuntu-22.04)"
  dir="$(dirname "$file")"
  start_emulator "$work/cloud-$nodes"
  echo "$bench: applying $nodes nodes" >&2
  if ! (cd "$dir" && "$bin" apply exp.hcl --endpoint "$endpoint" --auto-approve \
    >"$work/apply-$nodes.out" 2>"$work/apply-$nodes.err"); then
    echo "$bench: the apply of $nodes nodes failed:" >&2
    cat "$work/apply-$nodes.err" >&2
    tail -n 20 "$work/apply-$nodes.out" >&2
    exit 1
  fi
  admin PUT throttle '{"enabled": true}' >/dev/null
  local plan status
  plan="$(cd "$dir" && measure "plan-$nodes" plan exp.hcl)"
  grep -q 'No changes' "$work/plan-$nodes.out" || {
    echo "$bench: the plan of $nodes freshly applied nodes is not empty:" >&2
    tail -n 20 "$work/plan-$nodes.out" >&2
    exit 1
  }
  status="$(cd "$dir" && measure "status-$nodes" status exp.hcl)"
  stop_emulator
  read -r p_calls p_429 p_wall p_rss <<<"$plan"
  read -r s_calls s_429 s_wall s_rss <<<"$status"
  rows+=("| $nodes | $p_calls | $p_429 | $p_wall | $p_rss | $s_calls | $s_429 | $s_wall | $s_rss |")
  # The goals: calls that do not grow (<= 16 at 64 nodes, <= 24 at 512), no 429, a plan under 1 s.
  local most=24
  [ "$nodes" -le 64 ] && most=16
  [ "$p_calls" -le "$most" ] || failed+=("plan of $nodes nodes: $p_calls ARM calls (goal <= $most)")
  [ "$s_calls" -le "$most" ] || failed+=("status of $nodes nodes: $s_calls ARM calls (goal <= $most)")
  [ "$p_429" = 0 ] || failed+=("plan of $nodes nodes: $p_429 answers 429")
  [ "$s_429" = 0 ] || failed+=("status of $nodes nodes: $s_429 answers 429")
  if [ "${SMOKE:-0}" != 1 ] && [ "$nodes" -ge 512 ] &&
    awk -v w="$p_wall" 'BEGIN { exit !(w >= 1.0) }'; then
    failed+=("plan of $nodes nodes: ${p_wall}s (goal < 1 s)")
  fi
}

if [ "${SMOKE:-0}" = 1 ]; then
  scenario 4
  report="refresh-smoke.md"
else
  for nodes in 64 256 512; do scenario "$nodes"; done
  report="refresh.md"
fi

mkdir -p target/bench
{
  echo "# Reading Azure at scale: plan and status after an apply (emulator latency scale $scale, throttling on)"
  echo
  echo "| nodes | plan: ARM calls | 429s | wall (s) | peak RSS (MB) | status: ARM calls | 429s | wall (s) | peak RSS (MB) |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "ARM calls: every request the emulator answered during the command (its request count);"
  echo "before issue 32 a refresh read 3 per node (a VM, its instance view, its NIC) plus the others."
  echo
  echo "Binary: $bin. Machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%dT%H:%MZ)."
  echo "Goals: <= 16 calls at 64 nodes, <= 24 at 512; no 429; plan of 512 nodes < 1 s."
} >"target/bench/$report"
cat "target/bench/$report"
if [ "${#failed[@]}" -gt 0 ]; then
  printf '%s: goal missed: %s\n' "$bench" "${failed[@]}" >&2
  exit 1
fi
