#!/usr/bin/env bash
# Crash safety, 50 times: SIGKILL `dsinfra apply` at a random moment, apply again, and check that
# the emulated cloud holds exactly what the manifest asks for (no duplicate, no orphan) and that
# the state matches it. Each trial uses a fresh emulator and a fresh copy of the CosmoFlow seed;
# the test itself is `sigkill_at_five_moments_never_duplicates_or_orphans` in tests/apply.rs,
# which runs 5 fixed moments in the normal suite. TRIALS=N overrides the count.
set -euo pipefail
cd "$(dirname "$0")/.."
DSINFRA_KILL_TRIALS="${TRIALS:-50}" cargo test --test apply --quiet \
  sigkill_at_five_moments_never_duplicates_or_orphans -- --nocapture
