#!/usr/bin/env bash
# Fan-out benchmark: one 20 KiB script on 1, 8, 16 and 32 real sshd hosts with dsinfra's step
# runner, OpenSSH in parallel, the parallel-ssh Python library and Ansible, side by side on the
# same hosts and key exchange (curve25519-sha256). Writes a markdown table to target/bench/ssh.md.
#
#   scripts/bench-ssh.sh                       all sizes, 5 runs each
#   scripts/bench-ssh.sh --sizes 1,8 --runs 3  extra arguments go to the bench binary
#   SMOKE=1 scripts/bench-ssh.sh               1 and 2 hosts, one run, dsinfra and OpenSSH only,
#                                              dev build, into target/bench/ssh-smoke.md (what CI
#                                              runs, through scripts/bench-smoke.sh)
#
# Needs root (it starts sshd and creates the test user, like the tests), ssh, and python3 with
# venv; ansible-core and parallel-ssh are installed from PyPI into a venv in the tools directory
# (kept between runs). See shared/reference/test-harness.md for the baseline this repeats.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test --install-only

if [ "${SMOKE:-0}" = 1 ]; then
  mkdir -p target/bench
  cargo test --locked --quiet --bench ssh_fanout -- --sizes 1,2 --runs 1 \
    --out target/bench/ssh-smoke.md "$@"
  echo "bench-ssh: smoke table written to target/bench/ssh-smoke.md" >&2
  exit 0
fi

tools="${DSINFRA_TOOLS_DIR:-$HOME/.cache/dsinfra/tools}"
venv="$tools/bench-venv"
if [ ! -x "$venv/bin/ansible" ] || ! "$venv/bin/python" -c 'import pssh' 2>/dev/null; then
  echo "bench-ssh: installing ansible-core and parallel-ssh into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check ansible-core parallel-ssh
fi

mkdir -p target/bench
# The bench profile is optimised like a release build. DSINFRA_BENCH_PROFILE=dev measures the
# dev build instead (dependencies at opt-level 1), which is much cheaper to compile on 2 cores.
if [ "${DSINFRA_BENCH_PROFILE:-bench}" = dev ]; then
  cargo test --locked --bench ssh_fanout -- --venv "$venv" --out target/bench/ssh.md "$@"
else
  cargo bench --locked --bench ssh_fanout -- --venv "$venv" --out target/bench/ssh.md "$@"
fi
echo "bench-ssh: table written to target/bench/ssh.md" >&2
