# shellcheck shell=bash
# The caller's variables (bench, bin, work, scale, emulator_flags) are set before this is sourced.
# shellcheck disable=SC2154
# Shared by the bench scripts that drive `dsinfra emulator` (bench-apply.sh, bench-refresh.sh):
# sourced, not run. The caller sets `bin` (the dsinfra binary), `work` (a temp dir), `scale` (the
# emulator's latency scale), `emulator_flags` (an array: throttling, quota) and `bench` (its name,
# for messages).

# ensure_tools TOOL...: installs the Debian packages of the missing ones with apt-get.
ensure_tools() {
  local missing=() tool
  for tool in "$@"; do
    case "$tool" in
      time) [ -x /usr/bin/time ] || missing+=(time) ;;
      *) command -v "$tool" >/dev/null || missing+=("$tool") ;;
    esac
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "$bench: installing ${missing[*]} with apt-get" >&2
    if [ "$(id -u)" = 0 ]; then sudo_cmd=(); else sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# start_emulator DIR: a fresh `dsinfra emulator` whose cloud is kept in memory only
# (`--in-memory`: with a state dir it writes its whole cloud after changes, a cost of the test
# double, not of ARM's latency model); its output goes to DIR.out and DIR.err. Sets
# `emulator_pid` and `endpoint`.
start_emulator() {
  local dir="$1"
  mkdir -p "$dir"
  "$bin" emulator --port 0 --in-memory --latency-scale "$scale" "${emulator_flags[@]}" \
    >"$dir.out" 2>"$dir.err" &
  emulator_pid=$!
  endpoint=""
  for _ in $(seq 100); do
    endpoint="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$dir.out" | head -n1 || true)"
    [ -n "$endpoint" ] && return 0
    sleep 0.1
  done
  echo "$bench: the emulator did not start" >&2
  cat "$dir.err" >&2
  exit 1
}

stop_emulator() {
  if [ -n "${emulator_pid:-}" ]; then
    kill "$emulator_pid" 2>/dev/null || true
    wait "$emulator_pid" 2>/dev/null || true
  fi
  emulator_pid=""
}

# plain_cluster NAME NODES SIZE IMAGE: a cluster of NODES in the CosmoFlow seed's region, without
# its storage and steps, in a subnet wide enough for its NICs (Azure keeps 5 addresses of each
# subnet, so a /24 holds 251). Prints the manifest's path; the demo key is next to it.
plain_cluster() {
  local dir="$work/$1"
  mkdir -p "$dir"
  cp -r examples/keys "$dir/keys"
  cat >"$dir/exp.hcl" <<EOF_MANIFEST
experiment = "$1"

variable "ssh_key" { default = file("keys/demo.pub") }

azure { location = "southcentralus" }

network "hpc" {
  ssh_from = ["203.0.113.7/32"]
  subnet "default" { cidr = "10.0.0.0/22" }
}

cluster "train" {
  size    = "$3"
  count   = $2
  image   = "$4"
  ssh_key = var.ssh_key
}
EOF_MANIFEST
  echo "$dir/exp.hcl"
}
