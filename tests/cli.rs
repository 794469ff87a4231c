//! The CLI as users run it: the real `dsinfra` binary, its exit codes and its exact messages.

use assert_cmd::Command;
use predicates::prelude::*;

fn dsinfra() -> Command {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.env("NO_COLOR", "1").env_remove("AZURE_SUBSCRIPTION_ID");
    cmd
}

#[test]
fn help_teaches_the_first_steps() {
    dsinfra()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("dsinfra init --template dual-dsvm"))
        .stdout(predicate::str::contains("validate"))
        .stdout(predicate::str::contains("plan"));
}

#[test]
fn usage_errors_exit_1_with_clap_advice() {
    dsinfra()
        .arg("plan")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the following required arguments were not provided",
        ));
    dsinfra()
        .arg("aply")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unrecognized subcommand 'aply'"));
}
