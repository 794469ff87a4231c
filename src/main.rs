//! The `dsinfra` binary: everything lives in the library; this maps its result to an exit code.

fn main() {
    std::process::exit(dsinfra::run());
}
