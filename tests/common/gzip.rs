//! Gzip for test datasets: content-encoded blobs as CosmoFlow stores them (shared by the stage
//! tests and benches/shard_balance.rs).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// `bytes` gzip-compressed by the system's gzip (`-n`: no name or time stamp, reproducible).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .args(["-c", "-n", "-6"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip is installed");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().expect("gzip runs");
    writer
        .join()
        .expect("the writer thread does not panic")
        .expect("gzip reads its input");
    assert!(output.status.success(), "gzip failed");
    output.stdout
}
