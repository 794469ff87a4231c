//! What the mount steps put on the node, read from their rendered scripts: blobfuse2's config
//! in "always fresh" mode and the NFS version `nfs_cache` mounts with.

use super::*;

fn one_node() -> NodeContext {
    let mut ctx = NodeContext::new(
        "mounts",
        "vm.reader",
        vec![ClusterNode {
            name: "reader".into(),
            private_ip: "10.0.0.4".into(),
            ssh_port: 22,
        }],
    );
    ctx.storage.insert(
        "storage_account.data.container.raw".into(),
        StorageTarget::azure("dsinfradata", "raw"),
    );
    let mut share = StorageTarget::azure("dsinfranfs", "data");
    share.nfs = true;
    ctx.storage
        .insert("storage_account.nfs.file_share.data".into(), share);
    for account in ["storage_account.data", "storage_account.nfs"] {
        ctx.credentials.insert(
            account.into(),
            Credential {
                kind: CredentialKind::AccountKey,
                identity: format!("{account} key1"),
                value: Secret::new(FAKE_KEY),
            },
        );
    }
    ctx
}

fn render_one(kind: &str, params: &Value) -> Result<StepSpec, LibraryError> {
    let params: BTreeMap<String, Value> = serde_json::from_value(params.clone()).expect("a map");
    let request = StepRequest {
        name: kind,
        kind,
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    library::render(&request, &one_node()).map(|mut e| e.steps.remove(0))
}

/// The blobfuse2 YAML the script writes (between its here-document markers).
fn blobfuse2_config(params: &Value) -> String {
    let script = render_one("blobfuse2", params).expect("renders").script;
    let start = script.find("<<EOF_CONFIG\n").expect("a config") + "<<EOF_CONFIG\n".len();
    let end = script[start..].find("EOF_CONFIG\n").expect("its end") + start;
    script[start..end].to_owned()
}

/// `cache_timeout_sec = 0` turns every cache off: blobfuse2's attribute cache (it stayed at
/// 7200 s, so sizes and listings were stale for up to two hours), the kernel's attribute, entry,
/// negative-entry and listing caches, and the kernel page cache.
#[test]
fn blobfuse2_always_fresh_turns_off_attribute_listing_and_kernel_caches() {
    let fresh = blobfuse2_config(&json!({
        "container": "storage_account.data.container.raw", "cache_timeout_sec": 0,
        "attr_timeout_sec": 240, "entry_timeout_sec": 240, "negative_timeout_sec": 120
    }));
    for line in [
        "disable-kernel-cache: true\n",
        "libfuse:\n  attribute-expiration-sec: 0\n  entry-expiration-sec: 0\n  negative-entry-expiration-sec: 0\n  kernel-list-cache-expiration-sec: 0\n",
        "file_cache:\n  path: ${cache}\n  timeout-sec: 0\n",
        "attr_cache:\n  timeout-sec: 0\n",
    ] {
        assert!(fresh.contains(line), "missing {line:?} in:\n{fresh}");
    }
    // blobfuse2's docs: direct-io and disable-kernel-cache must not be combined.
    assert!(!fresh.contains("direct-io"), "{fresh}");

    // The default keeps the caches (the seed's kernel timeouts, a 2 h attribute cache).
    let cached = blobfuse2_config(&json!({"container": "storage_account.data.container.raw"}));
    for line in [
        "libfuse:\n  attribute-expiration-sec: 240\n  entry-expiration-sec: 240\n  negative-entry-expiration-sec: 120\nfile_cache:\n",
        "file_cache:\n  path: ${cache}\n  timeout-sec: 120\n",
        "attr_cache:\n  timeout-sec: 7200\n",
    ] {
        assert!(cached.contains(line), "missing {line:?} in:\n{cached}");
    }
    assert!(!cached.contains("disable-kernel-cache"), "{cached}");
}

/// The `mount -t nfs -o ...` options of a rendered `nfs_cache`.
fn nfs_options(params: &Value) -> Result<String, String> {
    let script = render_one("nfs_cache", params)
        .map_err(|e| e.to_string())?
        .script;
    let line = script
        .lines()
        .find(|l| l.contains("mount -t nfs -o "))
        .expect("a mount line");
    let options = line.split("mount -t nfs -o ").nth(1).expect("options");
    Ok(options.split(' ').next().expect("one word").to_owned())
}

/// An external export is mounted with the version the server offers (no `vers=`): a v4-only
/// server failed with the `vers=3` dsinfra forced. `version` pins one; an Azure Files share
/// gets 4.1, the only version it speaks.
#[test]
fn nfs_cache_negotiates_the_version_unless_told_and_shares_get_4_1() {
    let export = |version: Option<&str>| {
        let mut params = json!({"export": "10.0.0.200:/export/data"});
        if let Some(v) = version {
            params["version"] = json!(v);
        }
        nfs_options(&params)
    };
    assert_eq!(
        export(None).as_deref(),
        Ok("hard,proto=tcp,rsize=1048576,wsize=1048576,fsc")
    );
    assert_eq!(
        export(Some("3")).as_deref(),
        Ok("vers=3,hard,proto=tcp,rsize=1048576,wsize=1048576,fsc")
    );
    assert_eq!(
        export(Some("4.2")).as_deref(),
        Ok("vers=4.2,hard,proto=tcp,rsize=1048576,wsize=1048576,fsc")
    );
    assert_eq!(
        export(Some("5")),
        Err(
            "step `nfs_cache`: parameter `version`: \"5\" is not one of 3, 4, 4.0, 4.1, 4.2".into()
        )
    );
    let share = |version: Option<&str>| {
        let mut params = json!({"share": "storage_account.nfs.file_share.data"});
        if let Some(v) = version {
            params["version"] = json!(v);
        }
        nfs_options(&params)
    };
    let azure = Ok(
        "vers=4,minorversion=1,sec=sys,hard,proto=tcp,rsize=1048576,wsize=1048576,fsc".to_owned(),
    );
    assert_eq!(share(None), azure);
    assert_eq!(share(Some("4.1")), azure);
    assert_eq!(
        share(Some("3")),
        Err(
            "step `nfs_cache`: parameter `version`: an Azure Files NFS share speaks NFS 4.1 only"
                .into()
        )
    );
}
