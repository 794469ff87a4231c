//! `stage` through the binary on the four nodes of an Azure Machine Learning cluster (issue 17),
//! and on a two-VM cluster:
//! the emulator serves the manifest's storage account's blob data plane from a private Azurite
//! (`EmulatorConfig::blob_data_plane`), so the account advertises Azurite's URL as its blob
//! endpoint and `listKeys` answers the key Azurite knows; the `sas` dsinfra signs from that key
//! is checked by Azurite on every request. The nodes are the AML farm's sshd hosts
//! (tests/common/aml_nodes.rs) or the VM farm's (tests/common/nodes.rs), and run the real azcopy
//! (npm), named by `DSINFRA_AZCOPY`; `DSINFRA_TEMP_DIR` stands in for their temp disk.
//!
//! Held: the engine lists the container at the account's own endpoint (not
//! `https://NAME.blob.core.windows.net`); every rank copies its own size-balanced shard with
//! azcopy, decompressed and under its real name; the shards together are the whole prefix, no
//! file twice; each rank writes its done marker; a second apply starts nothing, changes no
//! record and never runs azcopy.
//! And `dsinfra emulator --azurite URL` serves the accounts of `AZURITE_ACCOUNTS` the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;

use base64::Engine as _;
use dsinfra::storage::{AccountKey, Auth, BlobStore, PutOptions};

use super::*;
use common::azurite::{Azurite, azcopy_binary};
use common::gzip::gzip;

/// The storage account the manifest names, so that Azurite can be started knowing it.
const ACCOUNT: &str = "amlstagedata";

/// The container the dataset lives in.
const CONTAINER: &str = "cosmo";

/// `(path under train/, uncompressed size)`: uneven sizes, so that balancing by size matters,
/// and a subdirectory, whose path the copy keeps.
const FILES: &[(&str, usize)] = &[
    ("univ_00.tfrecord", 96 * 1024),
    ("univ_01.tfrecord", 3 * 1024),
    ("univ_02.tfrecord", 41 * 1024),
    ("univ_03.tfrecord", 7 * 1024 + 13),
    ("univ_04.tfrecord", 130 * 1024),
    ("univ_05.tfrecord", 1024),
    ("univ_06.tfrecord", 57 * 1024),
    ("univ_07.tfrecord", 12 * 1024 + 7),
    ("univ_08.tfrecord", 75 * 1024),
    ("univ_09.tfrecord", 2 * 1024 + 1),
    ("val/univ_10.tfrecord", 33 * 1024),
    ("val/univ_11.tfrecord", 18 * 1024),
];

/// Deterministic bytes gzip cannot shrink (xorshift64*), so stored sizes keep the skew.
fn content(seed: usize, len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (seed as u64 + 1);
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        bytes.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// An `azcopy` that notes every invocation's first argument in `log`, then runs the real one:
/// what the nodes ran, without trusting the step's own output.
fn counting_azcopy(dir: &Path, real: &Path, log: &Path) -> PathBuf {
    let path = dir.join("azcopy");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .expect("the wrapper is written");
    let mut mode = std::fs::metadata(&path).expect("written").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&path, mode).expect("made executable");
    path
}

/// Creates the container in Azurite and uploads the dataset gzip content-encoded, plus a blob
/// outside the prefix. The test seeds it: containers made through ARM have no data plane.
async fn seed(azurite: &Azurite, key: &str) -> Vec<dsinfra::storage::BlobItem> {
    let key = AccountKey::new(ACCOUNT, key).expect("a valid key");
    let admin =
        BlobStore::new(&azurite.endpoint_of(ACCOUNT), Auth::AccountKey(key)).expect("endpoint");
    admin
        .create_container(CONTAINER)
        .await
        .expect("the container is made");
    let gzip_encoded = PutOptions {
        content_encoding: Some("gzip".into()),
        ..PutOptions::default()
    };
    for (i, (name, len)) in FILES.iter().enumerate() {
        admin
            .put(
                CONTAINER,
                &format!("train/{name}.gz"),
                &gzip(&content(i, *len)),
                &gzip_encoded,
            )
            .await
            .expect("upload");
    }
    admin
        .put(
            CONTAINER,
            "other/readme.txt",
            b"not staged\n",
            &PutOptions::default(),
        )
        .await
        .expect("upload");
    admin
        .list(CONTAINER, "train/", false)
        .await
        .expect("the dataset lists")
}

/// A private Azurite knowing [`ACCOUNT`] under a fresh key, seeded with the dataset.
pub(super) struct Dataset {
    azurite: Azurite,
    key: String,
    /// The blobs under `train/`, as the engine lists them.
    listing: Vec<dsinfra::storage::BlobItem>,
    /// The real azcopy the nodes run (through a counting wrapper).
    pub(super) azcopy: PathBuf,
}

impl Dataset {
    /// `None` (said why) outside CI when azcopy or Azurite is missing.
    pub(super) async fn start() -> Option<Self> {
        let azcopy = azcopy_binary()?;
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 64]>());
        let azurite = Azurite::start_with_accounts(&[(ACCOUNT, &key)])?;
        let listing = seed(&azurite, &key).await;
        Some(Self {
            azurite,
            key,
            listing,
            azcopy,
        })
    }

    /// The emulator's side: [`ACCOUNT`]'s blob data plane is this Azurite.
    pub(super) fn plane(&self) -> BlobDataPlane {
        BlobDataPlane::from_azurite_accounts(
            &self.azurite.url(),
            &format!("{ACCOUNT}:{}", self.key),
        )
        .expect("a valid data plane")
    }
}

/// The environment of the applies (the counting azcopy, the temp disk) and azcopy's log.
pub(super) struct Tools {
    pub(super) azcopy: PathBuf,
    temp: PathBuf,
    runs: PathBuf,
}

impl Tools {
    pub(super) fn new(w: &World, real: &Path) -> Self {
        let dir = w.path("tools");
        let temp = w.path("temp");
        std::fs::create_dir_all(&dir).expect("tools dir");
        std::fs::create_dir_all(&temp).expect("temp dir");
        let runs = w.path("azcopy-runs");
        let azcopy = counting_azcopy(&dir, real, &runs);
        Self { azcopy, temp, runs }
    }

    pub(super) fn env(&self) -> [(&'static str, &Path); 2] {
        [
            ("DSINFRA_AZCOPY", self.azcopy.as_path()),
            ("DSINFRA_TEMP_DIR", self.temp.as_path()),
        ]
    }

    /// The first argument of every azcopy the nodes ran so far.
    pub(super) fn runs(&self) -> String {
        std::fs::read_to_string(&self.runs).unwrap_or_default()
    }
}

/// The account, its container and a read SAS (https off: Azurite here speaks http), `rest`,
/// and `block` whose nodes stage `train/` sharded, decompressed, into `out/staged`.
fn write_manifest(w: &World, rest: &str, block: &str) {
    write_stage_manifest(w, rest, block, &w.out().join("staged"));
}

/// [`write_manifest`] staging into `to`.
pub(super) fn write_stage_manifest(w: &World, rest: &str, block: &str, to: &Path) {
    let to = to.display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"storage_account "data" {{
  name = "{ACCOUNT}"
  container "{CONTAINER}" {{}}
}}
sas "read" {{
  container  = storage_account.data.container.{CONTAINER}
  https_only = false
}}
{rest}{block}
  step "stage" {{
    from       = storage_account.data.container.{CONTAINER}
    sas        = sas.read
    prefix     = "train/"
    to         = "{to}"
    decompress = true
  }}
}}
"#
        ),
    );
}

/// Every file below `root` but the stage's own bookkeeping, by path relative to it.
fn staged_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    files_below(root)
        .into_iter()
        .filter_map(|(path, _)| {
            let relative = path.strip_prefix(root).ok()?.display().to_string();
            (!relative.starts_with(".dsinfra-stage/"))
                .then(|| (relative, std::fs::read(&path).expect("readable")))
        })
        .collect()
}

/// What the first apply (`first`, its output) must have done on the `ranks` nodes of `block`:
/// the whole prefix landed in `root`, each rank copied its own size-balanced shard with one
/// azcopy, and wrote its done marker.
pub(super) fn assert_staged(
    root: &Path,
    data: &Dataset,
    tools: &Tools,
    (block, ranks): (&str, usize),
    first: &str,
) {
    // The whole prefix landed, decompressed, under its real names and paths, byte for byte;
    // nothing outside the prefix did.
    let staged = staged_files(root);
    let expected: BTreeMap<String, Vec<u8>> = FILES
        .iter()
        .enumerate()
        .map(|(i, (name, len))| ((*name).to_owned(), content(i, *len)))
        .collect();
    assert_eq!(
        staged.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{first}"
    );
    for (name, bytes) in &expected {
        assert!(staged[name] == *bytes, "{name} differs from the original");
    }

    // Each rank copied a shard of its own, the one balancing by stored size gives it: together
    // every file, none twice, each rank's list what the node running that rank reported, and
    // each rank's done marker is there.
    let plan = dsinfra::steps::library::stage_shards(&data.listing, "train/", None, ranks, true)
        .expect("the listing shards");
    let state = root.join(".dsinfra-stage");
    let mut union = BTreeSet::new();
    let mut total = 0;
    for rank in 0..ranks {
        let copied =
            std::fs::read_to_string(state.join(format!("rank-{rank}.copied"))).unwrap_or_default();
        let mut mine: Vec<&str> = copied.lines().collect();
        mine.sort_unstable();
        let mut shard: Vec<&str> = plan.shards[rank]
            .entries
            .iter()
            .map(|(_, local, _)| local.as_str())
            .collect();
        shard.sort_unstable();
        assert_eq!(mine, shard, "rank {rank}\n{first}");
        assert!(!mine.is_empty(), "rank {rank} copied nothing\n{first}");
        total += mine.len();
        union.extend(mine.iter().map(|s| (*s).to_owned()));
        let said = format!(
            "[{block}[{rank}]] [stage] dsinfra: rank {rank}: copying {n} of {n} file(s) with azcopy ",
            n = mine.len()
        );
        assert!(
            first.lines().any(|l| l.starts_with(&said)),
            "{said}\n{first}"
        );
        let done =
            std::fs::read_to_string(state.join(format!("rank-{rank}.done"))).unwrap_or_default();
        assert_eq!(done.trim().len(), 64, "rank {rank}'s done marker: {done:?}");
    }
    assert_eq!(total, FILES.len(), "no file copied twice");
    assert_eq!(
        union.into_iter().collect::<Vec<_>>(),
        expected.keys().cloned().collect::<Vec<_>>()
    );
    assert_eq!(
        tools.runs().lines().filter(|l| *l == "copy").count(),
        ranks,
        "one copy per node: {}",
        tools.runs()
    );
}

/// A second apply starts no step, changes no record and runs no azcopy at all.
async fn assert_second_apply_runs_nothing(w: &World, tools: &Tools) {
    let before = w.state()["resources"].clone();
    let runs = tools.runs();
    let second = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &tools.env())
        .await;
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
    assert_eq!(w.state()["resources"], before, "{second}");
    assert_eq!(tools.runs(), runs, "{second}");
}

/// The primary blob endpoint the emulator advertises for the storage account at `address`.
async fn advertised_blob_endpoint(w: &World, address: &str) -> Value {
    let account = w.resource(address);
    let body: Value = reqwest::Client::new()
        .get(format!(
            "{}{}?api-version=2023-05-01",
            w.handle.endpoint(),
            account["id"].as_str().expect("an id")
        ))
        .bearer_auth("dsinfra-emulator")
        .send()
        .await
        .expect("the account reads")
        .json()
        .await
        .expect("JSON");
    body["properties"]["primaryEndpoints"]["blob"].clone()
}

// Issue 17, Done-when 2 (the staging half): `stage` on four AML nodes through the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_shards_a_container_across_four_aml_nodes_through_azurite_and_reruns_nothing() {
    let Some(data) = Dataset::start().await else {
        return;
    };
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm_and_blobs(Arc::clone(&farm), data.plane()).await;
    let block = format!(
        r#"aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 4
  admin_username = "{}"
  ssh_key        = "{}""#,
        farm.user(),
        farm.client_public_key(),
    );
    write_manifest(&w, "aml_workspace \"ws\" {}\n", &block);
    let tools = Tools::new(&w, &data.azcopy);

    let started_at = std::time::Instant::now();
    let first = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &tools.env())
        .await;
    eprintln!("first apply took {:?}", started_at.elapsed());
    assert_eq!(farm.booted().len(), 4, "{first}");
    // The account is Azurite's: its key is the one Azurite knows, and its blob endpoint (what
    // the engine listed and the nodes copied from) is Azurite's URL for it. The workspace's own
    // account, which Azurite does not know, keeps the public endpoint.
    assert_eq!(w.account_keys().await[0], data.key);
    assert_eq!(
        advertised_blob_endpoint(&w, "storage_account.data.account").await,
        format!("{}/", data.azurite.endpoint_of(ACCOUNT))
    );
    let workspace_storage = advertised_blob_endpoint(&w, "aml_workspace.ws.storage").await;
    assert!(
        workspace_storage
            .as_str()
            .is_some_and(|e| e.ends_with(".blob.core.windows.net/")),
        "{workspace_storage}"
    );
    // Nothing but the signature opens the container: Azurite refuses an anonymous listing.
    let anonymous = reqwest::get(format!(
        "{}/{CONTAINER}?restype=container&comp=list",
        data.azurite.endpoint_of(ACCOUNT)
    ))
    .await
    .expect("Azurite answers");
    assert!(!anonymous.status().is_success(), "{anonymous:?}");

    assert_staged(
        &w.out().join("staged"),
        &data,
        &tools,
        ("aml_cluster.scratch", 4),
        &first,
    );
    assert_second_apply_runs_nothing(&w, &tools).await;
}

// The same on VMs: a two-node cluster, reached through its head, stages its halves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_shards_a_container_across_a_two_vm_cluster_through_azurite() {
    let Some(data) = Dataset::start().await else {
        return;
    };
    let Some(farm) = NodeFarm::start() else {
        return;
    };
    let w = World::with_farm_and_blobs(Arc::clone(&farm), data.plane()).await;
    let block = format!(
        r#"cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 2
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}""#,
        farm.user(),
        farm.client_public_key(),
    );
    write_manifest(&w, "", &block);
    let tools = Tools::new(&w, &data.azcopy);
    let first = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &tools.env())
        .await;
    assert_staged(
        &w.out().join("staged"),
        &data,
        &tools,
        ("cluster.train", 2),
        &first,
    );
    assert_second_apply_runs_nothing(&w, &tools).await;
}

/// `dsinfra emulator` with `args`, `AZURITE_ACCOUNTS` set to `accounts` (or removed).
fn emulator_command(args: &[&str], accounts: Option<&str>) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dsinfra"));
    cmd.arg("emulator")
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("AZURITE_ACCOUNTS");
    if let Some(accounts) = accounts {
        cmd.env("AZURITE_ACCOUNTS", accounts);
    }
    cmd
}

// `dsinfra emulator --azurite URL` takes the accounts from AZURITE_ACCOUNTS, as Azurite does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_command_serves_the_accounts_of_azurite_accounts_from_azurite() {
    use std::io::BufRead as _;
    let refused = emulator_command(
        &["--in-memory", "--azurite", "http://127.0.0.1:10000"],
        None,
    )
    .output()
    .expect("dsinfra runs");
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--azurite: no Azurite accounts: set AZURITE_ACCOUNTS=name:key"),
        "{said}"
    );

    let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 64]>());
    let mut child = emulator_command(
        &[
            "--in-memory",
            "--latency-scale",
            "0",
            "--azurite",
            "http://127.0.0.1:10000/",
        ],
        Some(&format!("flagacct:{key}")),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("the emulator starts");
    let mut endpoint = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut endpoint)
        .expect("the endpoint is printed");
    let endpoint = endpoint.trim().to_owned();
    let client = reqwest::Client::new();
    let group = format!("{endpoint}/subscriptions/s/resourceGroups/rg");
    let account = format!("{group}/providers/Microsoft.Storage/storageAccounts/flagacct");
    let send = |request: reqwest::RequestBuilder| async move {
        request
            .bearer_auth("t")
            .send()
            .await
            .expect("the emulator answers")
    };
    send(
        client
            .put(format!("{group}?api-version=2025-04-01"))
            .json(&serde_json::json!({"location": "eastus"})),
    )
    .await;
    let created = send(
        client
            .put(format!("{account}?api-version=2025-01-01"))
            .json(&serde_json::json!({
                "location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"}
            })),
    )
    .await;
    assert_eq!(created.status(), 202);
    // At latency 0 the creation is done by the next request.
    let body: Value = send(client.get(format!("{account}?api-version=2025-01-01")))
        .await
        .json()
        .await
        .expect("JSON");
    let keys: Value = send(client.post(format!("{account}/listKeys?api-version=2025-01-01")))
        .await
        .json()
        .await
        .expect("JSON");
    child.kill().expect("the emulator stops");
    let _ = child.wait();
    assert_eq!(
        body["properties"]["primaryEndpoints"]["blob"], "http://127.0.0.1:10000/flagacct/",
        "{body}"
    );
    assert_eq!(keys["keys"][0]["value"], key.as_str(), "{keys}");
}
