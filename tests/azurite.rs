//! The storage data plane against the real Azure Storage emulator (Azurite 3.35).
//!
//! Each test starts its own Azurite on a free loopback port (tests/common/azurite.rs), so the
//! tests run concurrently. They check what unit tests cannot: that our locally signed SAS tokens
//! are accepted and refused exactly where Azure Storage's rules say, that leases, conditional
//! writes and snapshots behave as the state lock relies on, and that no secret leaks into an
//! error or `Debug` output on the way.

// Other tests share tests/common; not every helper there is used by this file.
#[allow(dead_code)]
mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::azurite::{ACCOUNT, Azurite, KEY};
use dsinfra::secret::percent_encode;
use dsinfra::storage::{
    AccountKey, Auth, BlobStore, Conditions, Error, LockInfo, Permissions, PutOptions, RemoteState,
    SasSpec, SasToken,
};

/// The shortest lease Azure allows: the tests that wait for one to expire wait this long.
const LEASE: Duration = Duration::from_secs(15);

fn key() -> AccountKey {
    AccountKey::new(ACCOUNT, KEY).expect("the dev key is valid base64")
}

/// A client with full rights, through the account key (a per-call account SAS signed locally).
fn admin(azurite: &Azurite) -> BlobStore {
    BlobStore::new(&azurite.endpoint(), Auth::AccountKey(key())).expect("a valid endpoint")
}

fn with_sas(azurite: &Azurite, spec: &SasSpec) -> BlobStore {
    let token = spec.sign(&key()).expect("a valid SAS spec");
    BlobStore::new(&azurite.endpoint(), Auth::sas_token(&token)).expect("a valid endpoint")
}

fn in_an_hour() -> chrono::DateTime<Utc> {
    Utc::now() + TimeDelta::hours(1)
}

fn holder(name: &str) -> LockInfo {
    LockInfo {
        user: name.to_owned(),
        host: "test-host".to_owned(),
        pid: 4242,
        command: format!("dsinfra apply ({name})"),
        since: "2026-01-02T03:04:05Z".to_owned(),
    }
}

async fn seed(store: &BlobStore) {
    assert!(store.create_container("data").await.expect("create data"));
    assert!(
        !store
            .create_container("data")
            .await
            .expect("create data again is not an error")
    );
    store.create_container("other").await.expect("create other");
    let gzip = PutOptions {
        content_encoding: Some("gzip".to_owned()),
        ..PutOptions::default()
    };
    store
        .put("data", "raw/a.csv.gz", b"\x1f\x8b fake gzip bytes", &gzip)
        .await
        .expect("put a");
    store
        .put("data", "raw/b.csv", b"x,y\n1,2\n", &PutOptions::default())
        .await
        .expect("put b");
    store
        .put(
            "data",
            "notes.txt",
            b"not under raw/",
            &PutOptions::default(),
        )
        .await
        .expect("put notes");
    store
        .put(
            "other",
            "secret.csv",
            b"other team's data",
            &PutOptions::default(),
        )
        .await
        .expect("put other");
}

/// A remote state for `key` in a new `tfstate` container of this Azurite.
async fn tfstate(azurite: &Azurite, key: &str) -> RemoteState {
    let store = admin(azurite);
    store
        .create_container("tfstate")
        .await
        .expect("create container");
    RemoteState::new(store, "tfstate", key)
}

#[tokio::test(flavor = "multi_thread")]
async fn read_list_account_sas_lists_and_reads_but_cannot_write() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    seed(&admin(&azurite)).await;
    let reader = with_sas(&azurite, &SasSpec::account(in_an_hour()).https_only(false));

    let listed = reader
        .list("data", "raw/", false)
        .await
        .expect("list with a read+list SAS");
    let summary: Vec<(&str, u64, Option<&str>)> = listed
        .iter()
        .map(|b| (b.name.as_str(), b.size, b.content_encoding.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [("raw/a.csv.gz", 18, Some("gzip")), ("raw/b.csv", 8, None)]
    );

    let blob = reader
        .get("data", "raw/b.csv", None, &Conditions::none())
        .await
        .expect("get with a read+list SAS");
    assert_eq!(blob.content, b"x,y\n1,2\n");
    // A blob stored gzip-encoded comes back byte for byte, not decompressed.
    let gz = reader
        .get("data", "raw/a.csv.gz", None, &Conditions::none())
        .await
        .expect("get a gzip-encoded blob");
    assert_eq!(gz.content, b"\x1f\x8b fake gzip bytes");
    assert_eq!(gz.properties.content_encoding.as_deref(), Some("gzip"));

    let refused = reader
        .put("data", "raw/c.csv", b"1", &PutOptions::default())
        .await
        .expect_err("a read+list SAS cannot write");
    assert_eq!(refused.status(), Some(403), "{refused}");
    assert_eq!(
        refused.code(),
        Some("AuthorizationPermissionMismatch"),
        "{refused}"
    );
    let url = format!("{}/data/raw%2Fc.csv", azurite.endpoint());
    assert_eq!(
        refused.to_string(),
        format!(
            "put blob {url} failed: HTTP 403 AuthorizationPermissionMismatch: \
             This request is not authorized to perform this operation using this permission."
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn account_sas_is_refused_after_expiry_and_over_http_when_https_only() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    seed(&admin(&azurite)).await;

    let https_only = with_sas(&azurite, &SasSpec::account(in_an_hour()));
    let refused = https_only
        .list("data", "", false)
        .await
        .expect_err("an https-only SAS is refused over http");
    assert_eq!(refused.status(), Some(403), "{refused}");
    assert_eq!(
        refused.code(),
        Some("AuthorizationProtocolMismatch"),
        "{refused}"
    );

    let expiry = Utc::now() + TimeDelta::seconds(2);
    let short = with_sas(&azurite, &SasSpec::account(expiry).https_only(false));
    short
        .get("data", "raw/b.csv", None, &Conditions::none())
        .await
        .expect("the SAS works before its expiry");
    // SAS times have whole seconds: wait past the truncated expiry with a margin.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let expired = short
        .get("data", "raw/b.csv", None, &Conditions::none())
        .await
        .expect_err("the SAS is refused after its expiry");
    assert_eq!(expired.status(), Some(403), "{expired}");
    // Azure answers AuthenticationFailed here; Azurite 3.35 answers AuthorizationFailure.
    assert_eq!(expired.code(), Some("AuthorizationFailure"), "{expired}");
}

#[tokio::test(flavor = "multi_thread")]
async fn container_and_blob_sas_reach_only_their_own_resource() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    seed(&admin(&azurite)).await;

    let data_only = with_sas(
        &azurite,
        &SasSpec::container("data", in_an_hour()).https_only(false),
    );
    let names: Vec<String> = data_only
        .list("data", "", false)
        .await
        .expect("list its own container")
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(names, ["notes.txt", "raw/a.csv.gz", "raw/b.csv"]);
    data_only
        .get("data", "notes.txt", None, &Conditions::none())
        .await
        .expect("read in its own container");
    let other = data_only
        .get("other", "secret.csv", None, &Conditions::none())
        .await
        .expect_err("a container SAS cannot read another container");
    assert_eq!(other.status(), Some(403), "{other}");
    // Azure answers AuthenticationFailed here; Azurite 3.35 answers AuthorizationFailure.
    assert_eq!(other.code(), Some("AuthorizationFailure"), "{other}");
    let listed = data_only
        .list("other", "", false)
        .await
        .expect_err("a container SAS cannot list another container");
    assert_eq!(listed.status(), Some(403), "{listed}");
    let write = data_only
        .put("data", "new.txt", b"1", &PutOptions::default())
        .await
        .expect_err("a read+list container SAS cannot write");
    assert_eq!(
        write.code(),
        Some("AuthorizationPermissionMismatch"),
        "{write}"
    );

    let writer = with_sas(
        &azurite,
        &SasSpec::container("data", in_an_hour())
            .permissions(Permissions::READ_WRITE)
            .https_only(false),
    );
    writer
        .put("data", "results/run-1.json", b"{}", &PutOptions::default())
        .await
        .expect("a read-write container SAS writes");

    let one_blob = with_sas(
        &azurite,
        &SasSpec::blob("data", "raw/b.csv", in_an_hour()).https_only(false),
    );
    let blob = one_blob
        .get("data", "raw/b.csv", None, &Conditions::none())
        .await
        .expect("a blob SAS reads its blob");
    assert_eq!(blob.content, b"x,y\n1,2\n");
    let sibling = one_blob
        .get("data", "notes.txt", None, &Conditions::none())
        .await
        .expect_err("a blob SAS cannot read a sibling");
    assert_eq!(sibling.status(), Some(403), "{sibling}");
}

fn under(lease: &str, etag: &str) -> PutOptions {
    PutOptions {
        conditions: Conditions::leased(lease).if_match(etag),
        ..PutOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_are_exclusive_renewable_breakable_and_releasable() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let store = admin(&azurite);
    store
        .create_container("ctr")
        .await
        .expect("create container");
    store
        .put("ctr", "b", b"v1", &PutOptions::default())
        .await
        .expect("put v1");

    let lease = store
        .acquire_lease("ctr", "b", LEASE)
        .await
        .expect("acquire");
    let again = store
        .acquire_lease("ctr", "b", LEASE)
        .await
        .expect_err("already leased");
    assert_eq!(again.code(), Some("LeaseAlreadyPresent"), "{again}");
    assert!(again.is_lease_present());
    store.renew_lease("ctr", "b", &lease).await.expect("renew");
    assert!(
        store
            .properties("ctr", "b")
            .await
            .expect("properties")
            .lease
            .is_held()
    );

    let unleased = store
        .put("ctr", "b", b"v2", &PutOptions::default())
        .await
        .expect_err("a write without the lease id is refused");
    assert_eq!(unleased.status(), Some(412), "{unleased}");
    assert_eq!(unleased.code(), Some("LeaseIdMissing"), "{unleased}");

    let remaining = store
        .break_lease("ctr", "b", Duration::ZERO)
        .await
        .expect("break");
    assert_eq!(remaining, 0);
    let broken = store
        .renew_lease("ctr", "b", &lease)
        .await
        .expect_err("a broken lease cannot be renewed");
    assert!(broken.is_lease_mismatch(), "{broken}");
    let lease2 = store
        .acquire_lease("ctr", "b", LEASE)
        .await
        .expect("acquire after break");
    store
        .release_lease("ctr", "b", &lease2)
        .await
        .expect("release");
    assert!(
        !store
            .properties("ctr", "b")
            .await
            .expect("properties")
            .lease
            .is_held()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn conditional_writes_metadata_and_snapshots_work_under_a_lease() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let store = admin(&azurite);
    store
        .create_container("ctr")
        .await
        .expect("create container");
    let etag = store
        .put("ctr", "b", b"v1", &PutOptions::default())
        .await
        .expect("put v1");
    let lease = store
        .acquire_lease("ctr", "b", LEASE)
        .await
        .expect("acquire");

    let outdated = store
        .put("ctr", "b", b"v2", &under(&lease, "\"0x0000000000000000\""))
        .await
        .expect_err("a write with a stale ETag is refused");
    assert!(outdated.is_condition_not_met(), "{outdated}");

    let metadata = [("owner".to_owned(), "ana".to_owned())]
        .into_iter()
        .collect();
    let etag2 = store
        .set_metadata(
            "ctr",
            "b",
            &metadata,
            &Conditions::leased(&lease).if_match(&etag),
        )
        .await
        .expect("set metadata under the lease");
    assert_ne!(etag2, etag, "metadata changes the ETag");
    let props = store.properties("ctr", "b").await.expect("properties");
    assert_eq!(props.metadata, metadata);
    assert_eq!(props.etag, etag2);

    let snapshot = store
        .snapshot("ctr", "b", &Conditions::leased(&lease))
        .await
        .expect("snapshot");
    store
        .put("ctr", "b", b"v2", &under(&lease, &etag2))
        .await
        .expect("a write with the lease id and the current ETag succeeds");
    let old = store
        .get("ctr", "b", Some(&snapshot), &Conditions::none())
        .await
        .expect("read the snapshot");
    assert_eq!(old.content, b"v1");
    let current = store
        .get("ctr", "b", None, &Conditions::none())
        .await
        .expect("read");
    assert_eq!(current.content, b"v2");
    let listing = store
        .list("ctr", "", true)
        .await
        .expect("list with snapshots");
    let snapshots: Vec<Option<&str>> = listing.iter().map(|b| b.snapshot.as_deref()).collect();
    assert_eq!(snapshots, [Some(snapshot.as_str()), None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_lockers_one_is_refused_with_the_holders_info() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let state = tfstate(&azurite, "exp/dsinfra.tfstate").await;

    let (a, b) = tokio::join!(
        state.lock(holder("ana"), LEASE),
        state.lock(holder("bo"), LEASE)
    );
    let (lock, refused) = match (a, b) {
        (Ok(lock), Err(refused)) | (Err(refused), Ok(lock)) => (lock, refused),
        (a, b) => panic!(
            "exactly one locker must win: {:?} / {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    };
    let winner = lock.info().clone();
    let Error::Locked { url, holder: info } = &refused else {
        panic!("expected Error::Locked, got {refused:?}")
    };
    assert_eq!(**info, winner);
    assert_eq!(
        url,
        &format!("{}/tfstate/exp%2Fdsinfra.tfstate", azurite.endpoint())
    );
    assert_eq!(
        refused.to_string(),
        format!(
            "the state {url} is locked by {}@test-host (pid 4242, `dsinfra apply ({})`, since 2026-01-02T03:04:05Z)",
            winner.user, winner.user
        )
    );
    assert_eq!(state.holder().await.expect("holder"), Some(winner));

    lock.release().await.expect("release");
    assert_eq!(state.holder().await.expect("holder"), None);
    let next = state
        .lock(holder("cy"), LEASE)
        .await
        .expect("free after release");
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_is_renewed_beyond_its_lease_duration() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let state = tfstate(&azurite, "renewed.tfstate").await;
    let lock = state.lock(holder("ana"), LEASE).await.expect("lock");
    tokio::time::sleep(LEASE + Duration::from_secs(5)).await;
    assert_eq!(lock.lost(), None);
    let refused = state
        .lock(holder("bo"), LEASE)
        .await
        .expect_err("still held");
    assert!(matches!(refused, Error::Locked { .. }), "{refused}");
    let version = lock.read().await.expect("read under the renewed lease");
    lock.write(b"{\"serial\":1}", &version.etag)
        .await
        .expect("write under the renewed lease");
    lock.release().await.expect("release");
}

/// Environment variable that turns `lock_holder_child_process` into the helper process.
const CHILD_ENDPOINT: &str = "DSINFRA_TEST_LOCK_CHILD_ENDPOINT";

/// The helper process of `a_sigkilled_holder_leaves_a_lock_that_expires`: the test re-runs this
/// test binary with only this test selected; it takes the lock, says so, and waits to be killed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "helper process run by a_sigkilled_holder_leaves_a_lock_that_expires"]
async fn lock_holder_child_process() {
    let Ok(endpoint) = std::env::var(CHILD_ENDPOINT) else {
        // Run by hand with --include-ignored: this is only a helper, there is nothing to hold.
        eprintln!(
            "lock_holder_child_process is a helper of a_sigkilled_holder_leaves_a_lock_that_expires"
        );
        return;
    };
    let store = BlobStore::new(&endpoint, Auth::AccountKey(key())).expect("a valid endpoint");
    let state = RemoteState::new(store, "tfstate", "killed.tfstate");
    let lock = state
        .lock(LockInfo::current("dsinfra apply (child)"), LEASE)
        .await
        .expect("the child takes the free lock");
    println!("LOCKED {}", lock.info().pid);
    tokio::time::sleep(Duration::from_mins(5)).await;
    drop(lock);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkilled_holder_leaves_a_lock_that_expires() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let state = tfstate(&azurite, "killed.tfstate").await;

    let mut child = Command::new(std::env::current_exe().expect("the test binary path"))
        .args([
            "--ignored",
            "--exact",
            "lock_holder_child_process",
            "--nocapture",
        ])
        .env(CHILD_ENDPOINT, azurite.endpoint())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary can be re-run");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut child_pid = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("the child's stdout is readable");
        if let Some(pid) = line.strip_prefix("LOCKED ") {
            child_pid = Some(pid.trim().parse::<u32>().expect("the child prints its pid"));
            break;
        }
    }
    let child_pid = child_pid.expect("the child took the lock before exiting");
    assert_eq!(child_pid, child.id());

    // std's Child::kill sends SIGKILL on Unix: no destructor, no release, no last renewal.
    child.kill().expect("kill the child");
    let killed_at = Instant::now();
    child.wait().expect("reap the child");

    let refused = state
        .lock(holder("ana"), LEASE)
        .await
        .expect_err("the dead holder's lease is still there at first");
    let Error::Locked { holder: info, .. } = &refused else {
        panic!("expected Error::Locked, got {refused:?}")
    };
    assert_eq!(info.pid, child_pid);
    assert_eq!(info.command, "dsinfra apply (child)");

    let lock = loop {
        match state.lock(holder("ana"), LEASE).await {
            Ok(lock) => break lock,
            Err(Error::Locked { .. }) if killed_at.elapsed() < LEASE + Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("the lock did not become free after the lease: {e}"),
        }
    };
    // The child renewed every third of the lease, so its last renewal was at most 5 s before
    // it died: the lease ran out between 10 and 15 s after the kill. Freed earlier would mean
    // something released it; the upper bound leaves room for a loaded CI machine.
    let waited = killed_at.elapsed();
    assert!(
        waited + Duration::from_secs(1) >= LEASE * 2 / 3,
        "freed after {waited:?}"
    );
    assert!(
        waited <= LEASE + Duration::from_secs(5),
        "freed after {waited:?}"
    );
    lock.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_lease_never_overwrites_the_state() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let state = tfstate(&azurite, "lost.tfstate").await;

    let lock = state.lock(holder("ana"), LEASE).await.expect("lock");
    let empty = lock.read().await.expect("read");
    assert_eq!(empty.content, None);
    let etag = lock.write(b"serial 1", &empty.etag).await.expect("write 1");

    let from_old_read = lock
        .write(b"serial 2", &empty.etag)
        .await
        .expect_err("a write from a stale read is refused");
    assert!(from_old_read.is_condition_not_met(), "{from_old_read}");

    // Someone runs `dsinfra force-unlock`.
    let broken_holder = state.force_unlock().await.expect("force-unlock");
    assert_eq!(broken_holder, Some(holder("ana")));

    let lost = lock
        .write(b"serial 2 from a lost lock", &etag)
        .await
        .expect_err("the old holder's write is refused");
    let Error::LeaseLost { url, source } = &lost else {
        panic!("expected Error::LeaseLost, got {lost:?}")
    };
    assert_eq!(url, &format!("{}/tfstate/lost.tfstate", azurite.endpoint()));
    assert!(source.is_lease_mismatch(), "{source}");
    // Azure calls this LeaseLost; Azurite 3.35 LeaseNotPresentWithBlobOperation, with Azure's text.
    assert_eq!(
        source.code(),
        Some("LeaseNotPresentWithBlobOperation"),
        "{lost}"
    );
    assert!(
        lost.to_string().starts_with(&format!(
            "the lock on the state {url} was lost (broken or expired and taken); the state was not written: "
        )),
        "{lost}"
    );

    // A new holder takes over and writes; the old holder still cannot.
    let next = state
        .lock(holder("bo"), LEASE)
        .await
        .expect("lock after the break");
    let current = next.read().await.expect("read");
    assert_eq!(current.content.as_deref(), Some(&b"serial 1"[..]));
    let newer = next
        .write(b"serial 2", &current.etag)
        .await
        .expect("write 2");
    let old = lock
        .write(b"serial 3 from a lost lock", &newer)
        .await
        .expect_err("even with the newest ETag, a lost lease cannot write");
    assert!(matches!(old, Error::LeaseLost { .. }), "{old}");
    assert_eq!(
        old.code(),
        Some("LeaseIdMismatchWithBlobOperation"),
        "{old}"
    );
    drop(lock);
    let after = next.read().await.expect("read");
    assert_eq!(after.content.as_deref(), Some(&b"serial 2"[..]));
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread")]
async fn state_round_trips_byte_for_byte_and_keeps_the_previous_version() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let state = tfstate(&azurite, "exp/round.tfstate").await;
    assert_eq!(state.read().await.expect("read a missing state"), None);

    let first: Vec<u8> = (0..=255_u8)
        .chain(b"{\"serial\":1}\r\n".iter().copied())
        .collect();
    let second = b"{\"serial\":2,\"lineage\":\"a\"}\n".to_vec();

    let lock = state
        .lock(LockInfo::current("dsinfra apply"), LEASE)
        .await
        .expect("lock");
    let empty = lock.read().await.expect("read");
    let etag1 = lock.write(&first, &empty.etag).await.expect("write 1");
    let read1 = lock.read().await.expect("read 1");
    assert_eq!(read1.content.as_deref(), Some(first.as_slice()));
    assert_eq!(read1.etag, etag1);
    lock.write(&second, &etag1).await.expect("write 2");
    lock.release().await.expect("release");

    let unlocked = state
        .read()
        .await
        .expect("read without a lock")
        .expect("the state exists");
    assert_eq!(unlocked.content, Some(second));
    let versions = state.versions().await.expect("versions");
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(
        state
            .read_version(&versions[0])
            .await
            .expect("read version"),
        first
    );
    assert_eq!(state.holder().await.expect("holder"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_key_or_sas_appears_in_errors_or_debug_output() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let admin = admin(&azurite);
    admin
        .create_container("data")
        .await
        .expect("create container");

    let account_sas = SasSpec::account(in_an_hour())
        .https_only(false)
        .sign(&key())
        .expect("sign");
    let container_sas = SasSpec::container("data", in_an_hour())
        .https_only(false)
        .sign(&key())
        .expect("sign");
    let reader =
        BlobStore::new(&azurite.endpoint(), Auth::sas_token(&account_sas)).expect("endpoint");
    let container_reader =
        BlobStore::new(&azurite.endpoint(), Auth::sas_token(&container_sas)).expect("endpoint");
    // A closed port: the transport error names the URL the SDK tried, SAS included.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let nowhere = BlobStore::new(
        &format!("http://127.0.0.1:{closed_port}/{ACCOUNT}"),
        Auth::sas(account_sas.expose_query()),
    )
    .expect("endpoint");

    let mut texts = Vec::new();
    let mut record = |error: Error| {
        texts.push(error.to_string());
        texts.push(format!("{error:?}"));
    };
    record(
        reader
            .put("data", "x", b"1", &PutOptions::default())
            .await
            .expect_err("read-only"),
    );
    record(
        container_reader
            .get("other", "x", None, &Conditions::none())
            .await
            .expect_err("other container"),
    );
    record(
        nowhere
            .list("data", "", false)
            .await
            .expect_err("nothing listens"),
    );
    record(
        admin
            .get("data", "missing", None, &Conditions::none())
            .await
            .expect_err("missing blob"),
    );
    record(BlobStore::new("not a url", Auth::AccountKey(key())).expect_err("bad endpoint"));
    texts.push(format!(
        "{:?} {:?} {:?} {:?}",
        reader,
        nowhere,
        account_sas,
        key()
    ));
    texts.push(format!("{:?}", Auth::sas_token(&container_sas)));

    let transport = &texts[4];
    assert!(
        transport.contains(&format!("127.0.0.1:{closed_port}/{ACCOUNT}/data")),
        "{transport}"
    );

    let secrets = [
        KEY.to_owned(),
        percent_encode(KEY),
        key().sign(&account_sas.spec().string_to_sign(ACCOUNT)),
        account_sas.expose_query().to_owned(),
        container_sas.expose_query().to_owned(),
        signature_parameter(&account_sas),
        signature_parameter(&container_sas),
    ];
    assert_no_secret_in(&texts, &secrets);
}

/// The percent-encoded `sig` value of a token.
fn signature_parameter(token: &SasToken) -> String {
    let query = token.expose_query();
    query.rsplit("sig=").next().unwrap_or_default().to_owned()
}

fn assert_no_secret_in(texts: &[String], secrets: &[String]) {
    for text in texts {
        for secret in secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret leaked into: {text}"
            );
        }
        assert!(
            !text.contains("sig="),
            "a signature parameter leaked into: {text}"
        );
    }
}
