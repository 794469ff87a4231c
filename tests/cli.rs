//! The CLI as users run it: the real `dsinfra` binary, its exit codes and its exact messages.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};

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
        .stdout(predicate::str::contains(
            "dsinfra init --template dual-dsvm",
        ))
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

/// A scratch copy of examples/ so that state directories land in a temp dir, not the repo.
fn scratch_examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    copy_dir(&src, &dir.path().join("examples"));
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn validate_summarises_a_valid_seed() {
    let dir = scratch_examples();
    dsinfra()
        .current_dir(dir.path())
        .args(["validate", "examples/nd40-beeond.hcl"])
        .assert()
        .success()
        .stdout(
            "examples/nd40-beeond.hcl is valid: experiment `cosmoflow`, 17 Azure resources from 5 blocks, 3 post-boot steps\n",
        );
}

#[test]
fn validate_prints_the_same_diagnostics_as_the_corpus() {
    // The corpus pins the exact rendering; the binary must print exactly that on stderr.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let expected = std::fs::read_to_string(root.join("tests/corpus/46-many-problems.expected"))
        .expect("corpus expectation exists");
    dsinfra()
        .current_dir(root)
        .args(["validate", "tests/corpus/46-many-problems.hcl"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(expected);
}

#[test]
fn malformed_var_flags_are_refused_with_an_example() {
    let dir = scratch_examples();
    dsinfra()
        .current_dir(dir.path())
        .args(["plan", "examples/dual-dsvm.hcl", "-var", "oops"])
        .assert()
        .code(1)
        .stderr("error: `-var oops` is not NAME=VALUE (for example: -var nodes=6)\n");
}

#[test]
fn plan_detailed_exitcode_saved_plan_and_staleness() {
    let dir = scratch_examples();
    let run = |args: &[&str]| {
        let mut cmd = dsinfra();
        cmd.current_dir(dir.path()).args(args);
        cmd
    };
    // Nothing exists yet: changes, exit 2.
    run(&[
        "plan",
        "examples/dual-dsvm.hcl",
        "--detailed-exitcode",
        "-out",
        "p.plan",
    ])
    .assert()
    .code(2)
    .stdout(predicate::str::contains(
        "Plan: 12 to add, 0 to change, 0 to replace, 0 to destroy.",
    ))
    .stderr(predicate::str::contains("note: saved the plan to p.plan"));
    // The saved plan is current for the same manifest and variables.
    run(&["show", "p.plan"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "note: the saved plan is current: the manifest and the state are as they were",
        ));
    // Editing the manifest makes it stale.
    let manifest = dir.path().join("examples/dual-dsvm.hcl");
    let text = std::fs::read_to_string(&manifest).expect("read manifest");
    std::fs::write(
        &manifest,
        text.replace("Standard_NC4as_T4_v3", "Standard_NC24ads_A100_v4"),
    )
    .expect("edit manifest");
    run(&["show", "p.plan"])
        .assert()
        .code(1)
        .stderr(predicate::str::is_match(
            "error: the manifest or its variables changed since the plan was saved \\(hash [0-9a-f]{12} then, [0-9a-f]{12} now\\): run `dsinfra plan -out` again\n$",
        ).expect("valid regex"));
}

#[test]
fn plan_json_is_shaped_like_terraform_show_json() {
    let dir = scratch_examples();
    let output = dsinfra()
        .current_dir(dir.path())
        .args(["plan", "examples/nd40-beeond.hcl", "--json"])
        .output()
        .expect("runs");
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let changes = json["resource_changes"]
        .as_array()
        .expect("resource_changes");
    let vms: Vec<&str> = changes
        .iter()
        .filter(|c| c["type"] == "Microsoft.Compute/virtualMachines")
        .map(|c| c["address"].as_str().expect("address"))
        .collect();
    assert_eq!(
        vms,
        [
            "cluster.train[0].vm",
            "cluster.train[1].vm",
            "cluster.train[2].vm",
            "cluster.train[3].vm"
        ]
    );
    assert!(
        changes
            .iter()
            .all(|c| c["change"]["actions"] == serde_json::json!(["create"]))
    );
}

/// Issue 13, "done when": the flagship cluster's plan puts every node in one InfiniBand fabric,
/// the cluster's availability set, in its proximity placement group.
#[test]
fn plan_json_shows_every_node_of_the_cluster_in_one_availability_set() {
    let dir = scratch_examples();
    let output = dsinfra()
        .current_dir(dir.path())
        .args(["plan", "examples/nd40-beeond.hcl", "--json"])
        .output()
        .expect("runs");
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let changes = json["resource_changes"]
        .as_array()
        .expect("resource_changes");
    let sets: Vec<&serde_json::Value> = changes
        .iter()
        .filter(|c| c["type"] == "Microsoft.Compute/availabilitySets")
        .collect();
    assert_eq!(sets.len(), 1, "one fabric");
    assert_eq!(sets[0]["address"], "cluster.train.availability_set");
    let after = &sets[0]["change"]["after"];
    assert_eq!(after["sku"], "Aligned");
    assert_eq!(after["proximity_placement_group"], "cluster.train.ppg");
    let fabrics: Vec<&serde_json::Value> = changes
        .iter()
        .filter(|c| c["type"] == "Microsoft.Compute/virtualMachines")
        .map(|c| &c["change"]["after"]["availability_set"])
        .collect();
    assert_eq!(fabrics.len(), 4);
    assert!(
        fabrics
            .iter()
            .all(|f| *f == "cluster.train.availability_set"),
        "{fabrics:?}"
    );
}

#[test]
fn fmt_check_lists_unformatted_files() {
    let dir = scratch_examples();
    dsinfra()
        .current_dir(dir.path())
        .args(["fmt", "--check", "examples/dual-dsvm.hcl"])
        .assert()
        .success()
        .stdout("");
    let messy = dir.path().join("messy.hcl");
    std::fs::write(
        &messy,
        "experiment=\"x\"\nazure {\nlocation=\"eastus\"\n}\n",
    )
    .expect("write");
    dsinfra()
        .current_dir(dir.path())
        .args(["fmt", "--check", "messy.hcl"])
        .assert()
        .code(1)
        .stdout("messy.hcl\n");
    dsinfra()
        .current_dir(dir.path())
        .args(["fmt", "messy.hcl"])
        .assert()
        .success();
    dsinfra()
        .current_dir(dir.path())
        .args(["fmt", "--check", "messy.hcl"])
        .assert()
        .success();
}

#[test]
fn init_writes_a_template_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    dsinfra()
        .current_dir(dir.path())
        .args(["init", "--list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("dual-dsvm"));
    dsinfra()
        .current_dir(dir.path())
        .args(["init", "--template", "single-gpu"])
        .assert()
        .success();
    assert!(dir.path().join("single-gpu.hcl").exists());
    dsinfra()
        .current_dir(dir.path())
        .args(["init", "--template", "single-gpu"])
        .assert()
        .code(1)
        .stderr("error: single-gpu.hcl already exists: choose another path, or pass --force to overwrite it\n");
    dsinfra()
        .current_dir(dir.path())
        .args(["init", "--template", "dual-dsv"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "error: there is no template `dual-dsv`: did you mean `dual-dsvm`? the templates are",
        ));
}

#[test]
fn graph_prints_dot_with_every_resource() {
    let dir = scratch_examples();
    dsinfra()
        .current_dir(dir.path())
        .args(["graph", "examples/nd40-beeond.hcl"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("digraph \"cosmoflow\" {"))
        .stdout(predicate::str::contains("\"cluster.train[3].vm\""));
}

#[test]
fn a_saved_plan_stays_current_when_reloaded_by_absolute_path() {
    // Regression: the manifest hash covered the resolved path of every `file()` read, which is
    // relative when `plan` is given a relative path and absolute when `show` reloads the plan's
    // recorded manifest, so every such plan looked stale.
    let dir = tempfile::tempdir().expect("temp dir");
    dsinfra()
        .current_dir(dir.path())
        .args(["init", "--template", "dual-dsvm"])
        .assert()
        .success();
    let key = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub");
    std::fs::copy(key, dir.path().join("demo.pub")).expect("copy key");
    let manifest = dir.path().join("dual-dsvm.hcl");
    let text = std::fs::read_to_string(&manifest).expect("read template");
    assert!(text.contains("file(\"~/.ssh/id_ed25519.pub\")"), "{text}");
    std::fs::write(
        &manifest,
        text.replace("file(\"~/.ssh/id_ed25519.pub\")", "file(\"demo.pub\")"),
    )
    .expect("write manifest");
    let var = ["-var", "my_ip=203.0.113.7/32"];
    dsinfra()
        .current_dir(dir.path())
        .args(["plan", "dual-dsvm.hcl", "-out", "p.plan"])
        .args(var)
        .assert()
        .success();
    dsinfra()
        .current_dir(dir.path())
        .args(["show", "p.plan"])
        .args(var)
        .assert()
        .success()
        .stderr(predicate::str::contains("note: the saved plan is current"));
}

#[test]
fn emulator_page_size_is_a_flag_and_zero_is_refused() {
    dsinfra()
        .args(["emulator", "--in-memory", "--page-size", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "invalid value '0' for '--page-size <N>': \"0\" is not a page size: give a whole number of at least 1",
        ));

    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dsinfra"))
        .args(["emulator", "--in-memory", "--page-size", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the emulator starts");
    let mut endpoint = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut endpoint)
        .expect("the endpoint is printed");
    let endpoint = endpoint.trim().to_owned();
    let address = endpoint.trim_start_matches("http://");
    let path = "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages?api-version=2024-11-01";
    let mut stream = std::net::TcpStream::connect(address).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n"
    )
    .expect("sends");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("reads");
    child.kill().expect("the emulator stops");
    let _ = child.wait();
    assert!(
        answer.contains(&format!("\"nextLink\":\"{endpoint}{path}&$skiptoken=1\"")),
        "{answer}"
    );
}

#[test]
fn emulator_unregistered_namespaces_start_not_registered() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dsinfra"))
        .args([
            "emulator",
            "--in-memory",
            "--unregistered",
            "Microsoft.DevTestLab,Microsoft.Storage",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the emulator starts");
    let mut endpoint = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut endpoint)
        .expect("the endpoint is printed");
    let address = endpoint.trim().trim_start_matches("http://").to_owned();
    let state = |namespace: &str| {
        let path = format!("/subscriptions/s/providers/{namespace}?api-version=2025-04-01");
        let mut stream = std::net::TcpStream::connect(&address).expect("connects");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n"
        )
        .expect("sends");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("reads");
        answer
    };
    let (dtl, storage, compute) = (
        state("Microsoft.DevTestLab"),
        state("Microsoft.Storage"),
        state("Microsoft.Compute"),
    );
    child.kill().expect("the emulator stops");
    let _ = child.wait();
    assert!(
        dtl.contains("\"registrationState\":\"NotRegistered\""),
        "{dtl}"
    );
    assert!(
        storage.contains("\"registrationState\":\"NotRegistered\""),
        "{storage}"
    );
    assert!(
        compute.contains("\"registrationState\":\"Registered\""),
        "{compute}"
    );
}

/// Issue 29 item 12: `dsinfra emulator --log-file F` logs every ARM request at debug level
/// (method, path as ARM serves it, status, duration), which is how a client nobody here wrote is
/// diagnosed: a request that ended in 501 is one line to find.
#[test]
fn emulator_logs_every_request_to_its_log_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("emulator.log");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dsinfra"))
        .args(["emulator", "--in-memory", "--log-file"])
        .arg(&log)
        .env_remove("DSINFRA_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the emulator starts");
    let mut endpoint = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut endpoint)
        .expect("the endpoint is printed");
    let address = endpoint.trim().trim_start_matches("http://").to_owned();
    let send = |path: &str| {
        let mut stream = std::net::TcpStream::connect(&address).expect("connects");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n"
        )
        .expect("sends");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("reads");
        answer
    };
    let served = send("/subscriptions/s/providers/Microsoft.Compute?api-version=2025-04-01");
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    // The JavaScript SDK's scope form: logged (and served) as the one-slash path.
    let missing = send("//subscriptions/s/providers/Microsoft.Web/sites?api-version=2024-04-01");
    assert!(missing.starts_with("HTTP/1.1 501"), "{missing}");
    child.kill().expect("the emulator stops");
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).expect("the log file is written");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("ARM request")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("method=GET")
            && lines[0].contains("path=/subscriptions/s/providers/Microsoft.Compute ")
            && lines[0].contains("status=200")
            && lines[0].contains("duration_ms="),
        "{text}"
    );
    assert!(
        lines[1].contains("path=/subscriptions/s/providers/Microsoft.Web/sites")
            && lines[1].contains("status=501"),
        "{text}"
    );
}
