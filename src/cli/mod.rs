//! Command-line interface: placeholder until the CLI lands.

/// Run dsinfra with the process arguments; returns the exit code.
pub fn run() -> i32 {
    0
}
