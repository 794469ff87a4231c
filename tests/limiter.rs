//! `--parallelism` bounds the ARM requests in flight for every operation, not only apply's walk
//! (issue 16): park, unpark and the refresh behind `status` go through the same limiter.
//!
//! The requests are counted on the wire: the binary talks to a proxy in front of the emulator
//! that holds every request for a moment (so requests sent together overlap there) and records
//! the most it ever had in flight at once. It rewrites the emulator's address in answers to its
//! own, so long-running-operation links lead back through it and polls are counted too.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use dsinfra::connect::builtin_emulator_config;
use dsinfra::emulator::{self, EmulatorHandle};

/// Eight VMs, so that eight power actions are sent together.
const MANIFEST: &str = r#"azure { location = "eastus" }

network "main" { ssh_from = ["203.0.113.7/32"] }

cluster "train" {
  count   = 8
  size    = "Standard_D4s_v5"
  ssh_key = file("demo.pub")
}
"#;

/// How long the proxy holds each request: long enough that requests sent together overlap.
const HOLD: Duration = Duration::from_millis(60);

/// Counts what passes through it on the way to the emulator.
struct Proxy {
    upstream: String,
    /// The proxy's own `http://127.0.0.1:PORT`.
    endpoint: String,
    http: reqwest::Client,
    in_flight: AtomicUsize,
    most: AtomicUsize,
    seen: AtomicUsize,
}

impl Proxy {
    /// Forget what was counted so far.
    fn reset(&self) {
        self.most.store(0, Ordering::SeqCst);
        self.seen.store(0, Ordering::SeqCst);
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }
}

async fn forward(
    State(proxy): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = proxy.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    proxy.most.fetch_max(now, Ordering::SeqCst);
    proxy.seen.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(HOLD).await;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let answer = proxy
        .http
        .request(method, format!("{}{path}", proxy.upstream))
        .headers(
            headers
                .into_iter()
                .filter_map(|(n, v)| n.filter(|n| n != "host").map(|n| (n, v)))
                .collect(),
        )
        .body(body)
        .send()
        .await
        .expect("the emulator answers");
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "transfer-encoding" && name != "content-length" {
            let value = value
                .to_str()
                .expect("ASCII headers")
                .replace(&proxy.upstream, &proxy.endpoint);
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.expect("the emulator's body reads");
    let bytes = String::from_utf8_lossy(&bytes).replace(&proxy.upstream, &proxy.endpoint);
    proxy.in_flight.fetch_sub(1, Ordering::SeqCst);
    response.body(Body::from(bytes)).expect("a valid response")
}

/// The proxy's endpoint and its counters.
async fn proxy_to(emulator: &EmulatorHandle) -> (String, Arc<Proxy>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("a free port on 127.0.0.1");
    let endpoint = format!("http://{}", listener.local_addr().expect("bound"));
    let proxy = Arc::new(Proxy {
        upstream: emulator.endpoint().trim_end_matches('/').to_owned(),
        endpoint: endpoint.clone(),
        http: reqwest::Client::new(),
        in_flight: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        seen: AtomicUsize::new(0),
    });
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Arc::clone(&proxy));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (endpoint, proxy)
}

fn dsinfra(dir: &Path, endpoint: &str, args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("DSINFRA_EMULATOR_LATENCY_SCALE", "0.01")
        .env_remove("AZURE_SUBSCRIPTION_ID")
        .args(args)
        .args(["--endpoint", endpoint]);
    // The binary blocks; the emulator and the proxy run on this test's runtime meanwhile.
    cmd.assert()
}

/// Eight applied VMs behind a counting proxy.
async fn eight_vms() -> (tempfile::TempDir, EmulatorHandle, String, Arc<Proxy>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub");
    std::fs::copy(key, dir.path().join("demo.pub")).expect("copy the demo key");
    std::fs::write(dir.path().join("exp.hcl"), MANIFEST).expect("write the manifest");
    let mut config = builtin_emulator_config(None, 0.01);
    config.throttle = false;
    let emulator = emulator::start(config).await.expect("the emulator starts");
    let (endpoint, proxy) = proxy_to(&emulator).await;
    let path = dir.path().to_owned();
    let direct = emulator.endpoint();
    tokio::task::spawn_blocking(move || {
        dsinfra(
            &path,
            &direct,
            &["apply", "exp.hcl", "--auto-approve", "--steps", "skip"],
        )
        .success();
    })
    .await
    .expect("apply ran");
    (dir, emulator, endpoint, proxy)
}

/// Run the binary against the proxy without blocking the runtime the proxy runs on.
async fn run(dir: &Path, endpoint: &str, args: &[&str]) -> String {
    let (dir, endpoint) = (dir.to_owned(), endpoint.to_owned());
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let assert = dsinfra(&dir, &endpoint, &args).success();
        String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
    })
    .await
    .expect("the command ran")
}

/// Guards issue 16: park sent every VM's deallocate at once, whatever `--parallelism` said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_two_bounds_the_requests_in_flight_while_eight_vms_are_parked() {
    let (dir, _emulator, endpoint, proxy) = eight_vms().await;
    let err = run(
        dir.path(),
        &endpoint,
        &["park", "exp.hcl", "--auto-approve", "--parallelism", "2"],
    )
    .await;
    // The refresh before the park and the eight deallocates with their polls all passed.
    assert!(proxy.seen() > 16, "only {} requests seen", proxy.seen());
    assert_eq!(
        proxy.most(),
        2,
        "park --parallelism 2 had {} ARM requests in flight at once\n{err}",
        proxy.most()
    );
    // Park's progress is apply's renderer: timestamped lines, one per VM and event.
    for i in 0..8 {
        let started = format!(" cluster.train[{i}].vm: deallocating...\n");
        let done = format!(" cluster.train[{i}].vm: deallocated (parked) after ");
        assert!(err.contains(&started), "{err}");
        assert!(err.contains(&done), "{err}");
    }
    let line = err
        .lines()
        .find(|l| l.ends_with("cluster.train[0].vm: deallocating..."))
        .expect("a line for the first VM");
    assert!(
        chrono::DateTime::parse_from_rfc3339(line.split(' ').next().expect("a first word")).is_ok(),
        "not an apply-style timestamped line: {line}"
    );

    // The same bound holds for unpark; without it the same wire sees more at once, so the
    // count above is a real measurement, not an artefact of the proxy.
    proxy.reset();
    run(
        dir.path(),
        &endpoint,
        &["unpark", "exp.hcl", "--auto-approve", "--steps", "skip"],
    )
    .await;
    assert!(
        proxy.most() > 2,
        "unpark at the default parallelism never had more than {} requests in flight",
        proxy.most()
    );
}

/// Guards issue 16: a refresh had its own fixed bound of 32 reads, not `--parallelism`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_two_bounds_the_reads_of_the_refresh_behind_status() {
    let (dir, _emulator, endpoint, proxy) = eight_vms().await;
    proxy.reset();
    run(
        dir.path(),
        &endpoint,
        &["status", "exp.hcl", "--parallelism", "2"],
    )
    .await;
    // A refresh by lists (decision 70): the group, a list per resource type and the VMs'
    // statuses, all started at once, are still more reads than the bound.
    assert!(proxy.seen() > 4, "only {} requests seen", proxy.seen());
    assert_eq!(
        proxy.most(),
        2,
        "status --parallelism 2 had {} reads in flight at once",
        proxy.most()
    );
    proxy.reset();
    run(dir.path(), &endpoint, &["status", "exp.hcl"]).await;
    assert!(
        proxy.most() > 2,
        "status at the default parallelism never had more than {} reads in flight",
        proxy.most()
    );
}

/// `--parallelism 0` is refused by clap, once, for every command that takes it.
#[test]
fn parallelism_zero_is_refused_before_anything_is_read() {
    for command in ["apply", "park", "unpark", "status"] {
        let assert = Command::cargo_bin("dsinfra")
            .expect("built")
            .args([command, "exp.hcl", "--parallelism", "0"])
            .env("NO_COLOR", "1")
            .assert()
            .code(1);
        let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert!(
            err.starts_with("error: invalid value '0' for '--parallelism <N>': "),
            "{command}: {err}"
        );
    }
}
