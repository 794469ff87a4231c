//! A private Azurite (the Azure Storage emulator) per test, on a free loopback port.
//!
//! Each test starts its own `azurite-blob` with its own data directory, so tests run
//! concurrently without seeing each other's containers and leases. The process is killed when
//! the [`Azurite`] value is dropped. The binary comes from `DSINFRA_AZURITE_BLOB` (set by
//! `scripts/test`) or the tools directory `scripts/test --install-only` fills. If it is missing,
//! a CI run fails; a local run prints why and the test returns early, never silently.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Azurite's well-known development account.
pub const ACCOUNT: &str = "devstoreaccount1";

/// The well-known key of [`ACCOUNT`]: public, documented by Microsoft, only valid on Azurite.
pub const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// How long Azurite may take to listen: Node starts in about a second on these machines.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running Azurite blob service, killed on drop.
pub struct Azurite {
    child: Child,
    port: u16,
    // Kept so that the data directory lives as long as the process.
    _dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts a private Azurite. Returns `None` only outside CI when the binary is missing,
    /// after printing why; under CI (`CI=true`) that is a failure.
    pub fn start() -> Option<Self> {
        Self::start_with(None)
    }

    /// Starts a private Azurite that knows `accounts` (name, base64 key) instead of the dev
    /// account, as `AZURITE_ACCOUNTS` tells it: the accounts an emulator's
    /// [`BlobDataPlane`](dsinfra::emulator::BlobDataPlane) serves here. `None` as for
    /// [`Azurite::start`].
    pub fn start_with_accounts(accounts: &[(&str, &str)]) -> Option<Self> {
        Self::start_with(Some(&azurite_accounts(accounts)))
    }

    fn start_with(accounts: Option<&str>) -> Option<Self> {
        let binary = binary();
        if !binary.exists() {
            let why = format!(
                "azurite-blob not found at {} (install it with scripts/test --install-only)",
                binary.display()
            );
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("NOT RUN: {why}");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory can be created");
        // A free port can be taken by someone else between our probe and Azurite's bind: try a
        // few ports before giving up.
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log = std::fs::File::create(dir.path().join(format!("azurite-{port}.log")))
                .expect("the log file can be created in the temporary directory");
            let mut command = Command::new(&binary);
            // Never the caller's accounts by accident: only what this test asked for.
            command.env_remove("AZURITE_ACCOUNTS");
            if let Some(accounts) = accounts {
                command.env("AZURITE_ACCOUNTS", accounts);
            }
            let mut child = command
                .args([
                    "--blobHost",
                    "127.0.0.1",
                    "--blobPort",
                    &port.to_string(),
                    "--location",
                ])
                .arg(dir.path())
                .args([
                    "--skipApiVersionCheck",
                    "--loose",
                    "--silent",
                    "--disableTelemetry",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            match wait_until_listening(&mut child, port) {
                Ok(()) => {
                    return Some(Self {
                        child,
                        port,
                        _dir: dir,
                    });
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log =
                        std::fs::read_to_string(dir.path().join(format!("azurite-{port}.log")))
                            .unwrap_or_default();
                    last_error = format!("{why}; its log:\n{log}");
                }
            }
        }
        panic!("Azurite did not start: {last_error}");
    }

    /// The blob endpoint of the dev account, e.g. `http://127.0.0.1:41234/devstoreaccount1`.
    pub fn endpoint(&self) -> String {
        self.endpoint_of(ACCOUNT)
    }

    /// The path-style blob endpoint of `account`, e.g. `http://127.0.0.1:41234/stageacct`.
    pub fn endpoint_of(&self, account: &str) -> String {
        format!("{}/{account}", self.url())
    }

    /// The blob service without an account, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        // Our own child, by its handle: never by name.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `accounts` as `AZURITE_ACCOUNTS` writes them: `name:key;name:key`.
pub fn azurite_accounts(accounts: &[(&str, &str)]) -> String {
    accounts
        .iter()
        .map(|(name, key)| format!("{name}:{key}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// The npm azcopy (`DSINFRA_AZCOPY`, set by `scripts/test`, or the shared tools directory) that
/// talks to Azurite in the stage tests; `None` (said why) outside CI when it is missing, a
/// failure under CI.
pub fn azcopy_binary() -> Option<PathBuf> {
    let path = std::env::var_os("DSINFRA_AZCOPY").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(
                ".cache/dsinfra/tools/node_modules/@azure-tools/azcopy-linux/dist/bin/azcopy_linux_amd64",
            )
        },
        PathBuf::from,
    );
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "azcopy not found at {} (set DSINFRA_AZCOPY or run scripts/test --install-only)",
        path.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("NOT RUN: {why}");
    None
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("DSINFRA_AZURITE_BLOB") {
        return PathBuf::from(path);
    }
    let tools = std::env::var_os("DSINFRA_TOOLS_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/dsinfra/tools")
        },
        PathBuf::from,
    );
    tools.join("node_modules/.bin/azurite-blob")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port can be bound");
    listener
        .local_addr()
        .expect("a bound listener has an address")
        .port()
}

fn wait_until_listening(child: &mut Child, port: u16) -> Result<(), String> {
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "azurite-blob exited with {status} before listening on port {port}"
            ));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "azurite-blob did not listen on port {port} within {START_TIMEOUT:?}"
    ))
}
