//! Single-node step kinds: drivers (`mofed`), mounts (`blobfuse2`, `blobfuse`, `azure_files`,
//! `nfs_cache`) and the user's own `script`.
//!
//! Mounts are per boot by default: their caches live on the temp disk, which a deallocation
//! wipes, so they are set up again after every boot (the runner's `PerBoot` policy) and each
//! script survives a cache directory left over from before a plain reboot.

use std::collections::BTreeMap;

use serde_json::json;

use super::params::check_path;
use super::{Builder, Fetch, LibraryError, Part, secret_input};
use crate::steps::spec::{RunPolicy, Scope};

/// The seed's FUSE attribute/entry/negative timeouts (seconds): `attr_timeout=240
/// entry_timeout=240 negative_timeout=120`.
const SEED_ATTR_TIMEOUT: u64 = 240;
const SEED_ENTRY_TIMEOUT: u64 = 240;
const SEED_NEGATIVE_TIMEOUT: u64 = 120;

/// The DOCA-OFED release the `mofed` step installs by default: the DOCA-Host LTS line
/// (Azure/azhpc-images moved its Ubuntu images from MLNX_OFED to DOCA-OFED, whose DKMS modules
/// build for the 6.x linux-azure kernels the MLNX_OFED 5.9 tarball predates; issue 29, item 11).
pub const DOCA_VERSION: &str = "2.9.1";

/// `mofed`: the driver install (may reboot), then a per-boot port check. A `version` like
/// `2.9.1` installs DOCA-OFED (`doca-ofed`) from NVIDIA's apt repository of that release; one
/// like `5.9-0.5.6.0.107` installs that MLNX_OFED tarball, as before.
pub(super) fn mofed(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let version = p.text_or("version", DOCA_VERSION)?.to_owned();
    let number = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit());
    let doca = {
        let parts: Vec<&str> = version.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| number(p))
    };
    let mlnx = version
        .split_once('-')
        .is_some_and(|(major, rest)| major.split('.').all(number) && rest.split('.').all(number));
    if !doca && !mlnx {
        return Err(LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "version".into(),
            why: format!(
                "{version:?} is neither a DOCA-OFED release like {DOCA_VERSION} nor an MLNX_OFED \
                 version like 5.9-0.5.6.0.107"
            ),
        });
    }
    let root = b.ctx().apt_root.clone().unwrap_or_default();
    let vars = json!({
        "version": version,
        "doca": doca,
        "root": root,
        "enable_ipoib": p.bool_or("enable_ipoib", true)?,
        "hold_kernel": p.bool_or("hold_kernel", true)?,
    });
    let request = b.request();
    b.push(Part::new(
        None,
        "mofed.sh.j2",
        "Mellanox OFED drivers",
        request.scope,
        request.policy,
        vars.clone(),
    ))?;
    b.push(Part::new(
        Some("verify"),
        "mofed-verify.sh.j2",
        "InfiniBand ports active",
        request.scope,
        RunPolicy::PerBoot,
        vars,
    ))
}

/// How long blobfuse2's own attribute cache (`attr_cache.timeout-sec`) keeps sizes, times and
/// listings when the mount is not "always fresh".
const ATTR_CACHE_TIMEOUT: u64 = 7200;

/// `blobfuse2`: a container mounted with a file cache on the temp disk.
///
/// `cache_timeout_sec = 0` means "always fresh": every cache that could serve stale data is
/// off, not only the file cache. blobfuse2 answers `stat` and `ls` from its attribute cache
/// (`attr_cache`, 7200 s here otherwise) and the kernel from its own attribute, entry and
/// negative-entry caches (`libfuse` `*-expiration-sec`) and, with fuse3, its directory listing
/// cache (`kernel-list-cache-expiration-sec`); any of them left on keeps sizes and listings
/// stale after another writer changes the container. `disable-kernel-cache` (blobfuse2 2.5.0)
/// also keeps the kernel's page cache from serving old file content; `direct-io` is not used,
/// because blobfuse2's docs say not to combine the two and it also turns off the file cache.
pub(super) fn blobfuse2(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let target = b.storage("container")?;
    let credential = b.credential("container", Some("sas"))?;
    let cache_timeout = p.int_or("cache_timeout_sec", 120)?;
    let fresh = cache_timeout == 0;
    // Always fresh overrides the kernel timeouts: a fresh file cache behind a kernel that
    // remembers attributes for minutes is not fresh.
    let kernel_timeout = |param: &str, default: u64| -> Result<u64, LibraryError> {
        Ok(if fresh { 0 } else { p.int_or(param, default)? })
    };
    let vars = json!({
        "account": target.account,
        "container": target.name,
        "endpoint": target.blob_endpoint,
        "mount": p.path_or("mount", "/mnt/blob")?,
        "cache_dir": p.path_or("cache_dir", "{temp}/blobfuse2")?,
        "cache_timeout": cache_timeout,
        "cache_size_mb": p.int("cache_size_gb")?.map(|gb| gb.saturating_mul(1024)),
        "read_only": p.bool_or("read_only", false)?,
        "disable_compression": p.bool_or("disable_compression", false)?,
        "attr_timeout": kernel_timeout("attr_timeout_sec", SEED_ATTR_TIMEOUT)?,
        "entry_timeout": kernel_timeout("entry_timeout_sec", SEED_ENTRY_TIMEOUT)?,
        "negative_timeout": kernel_timeout("negative_timeout_sec", SEED_NEGATIVE_TIMEOUT)?,
        "attr_cache_timeout": if fresh { 0 } else { ATTR_CACHE_TIMEOUT },
        "always_fresh": fresh,
        "sas_mode": credential.kind == super::CredentialKind::Sas,
    });
    let request = b.request();
    let mut part = Part::new(
        None,
        "blobfuse2.sh.j2",
        "blobfuse2 mount",
        request.scope,
        request.policy,
        vars,
    );
    part.secrets.push(secret_input("storage", credential));
    b.push(part)
}

/// `blobfuse`: legacy v1, Ubuntu 20.04 only.
pub(super) fn blobfuse(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    if let Some(release) = b.ctx().ubuntu.as_deref()
        && release != "20.04"
    {
        return Err(b.unsupported(format!(
            "blobfuse v1 has no package for Ubuntu {release} (only 20.04, and it is retired in \
             September 2026); use step \"blobfuse2\" instead"
        )));
    }
    let p = b.params();
    let target = b.storage("container")?;
    let credential = b.credential("container", None)?;
    let vars = json!({
        "account": target.account,
        "container": target.name,
        "mount": p.path_or("mount", "/mnt/blob")?,
        "tmp_dir": p.path_or("tmp_dir", "{temp}/blobfuse")?,
        "cache_timeout": p.int_or("file_cache_timeout_sec", 120)?,
        "attr_timeout": SEED_ATTR_TIMEOUT,
        "entry_timeout": SEED_ENTRY_TIMEOUT,
        "negative_timeout": SEED_NEGATIVE_TIMEOUT,
        "sas_mode": credential.kind == super::CredentialKind::Sas,
    });
    let request = b.request();
    let mut part = Part::new(
        None,
        "blobfuse.sh.j2",
        "blobfuse (v1) mount",
        request.scope,
        request.policy,
        vars,
    );
    part.secrets.push(secret_input("storage", credential));
    b.push(part)
}

/// `azure_files`: an SMB 3.1.1 (or NFS 4.1) mount of a file share, kept in fstab.
pub(super) fn azure_files(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let target = b.storage("share")?;
    let vars = json!({
        "account": target.account,
        "share": target.name,
        "host": target.file_host,
        "nfs": target.nfs,
        "mount": p.path_or("mount", "/mnt/share")?,
    });
    let request = b.request();
    let mut part = Part::new(
        None,
        "azure_files.sh.j2",
        "Azure Files mount",
        request.scope,
        request.policy,
        vars,
    );
    if !target.nfs {
        // SMB authenticates with the account key; an NFS share authenticates by network.
        part.secrets
            .push(secret_input("storage", b.credential("share", None)?));
    }
    b.push(part)
}

/// The NFS versions `nfs_cache` accepts (`version`), as `mount.nfs` spells them in `vers=`.
pub const NFS_VERSIONS: [&str; 5] = ["3", "4", "4.0", "4.1", "4.2"];

/// The mount options every `nfs_cache` mount gets, after the version: hard mounts (a server
/// hiccup blocks rather than returning I/O errors to training jobs), TCP, 1 MiB transfers and
/// FS-Cache.
const NFS_OPTIONS: &str = "hard,proto=tcp,rsize=1048576,wsize=1048576,fsc";

/// `nfs_cache`: cachefilesd on the temp disk and an NFS mount with `fsc`.
///
/// The NFS version is the user's `version`, else: 4.1 for an Azure Files share (the only
/// version it speaks), and for an external export no `vers=` at all, so the client negotiates
/// the highest version the server offers (a v4-only server then works; forcing `vers=3`, as
/// dsinfra once did, fails against it).
pub(super) fn nfs_cache(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let bad = |param: &str, why: String| LibraryError::BadParam {
        step: b.name().to_owned(),
        param: param.into(),
        why,
    };
    let version = p.text("version")?;
    if let Some(v) = version
        && !NFS_VERSIONS.contains(&v)
    {
        return Err(bad(
            "version",
            format!("{v:?} is not one of {}", NFS_VERSIONS.join(", ")),
        ));
    }
    let (export, version_option) = match (p.text("share")?, p.text("export")?) {
        (Some(_), None) => {
            let target = b.storage("share")?;
            if version.is_some_and(|v| v != "4.1") {
                return Err(bad(
                    "version",
                    "an Azure Files NFS share speaks NFS 4.1 only".to_owned(),
                ));
            }
            (
                format!("{}:/{}/{}", target.file_host, target.account, target.name),
                // As Azure's documentation mounts it.
                Some("vers=4,minorversion=1,sec=sys".to_owned()),
            )
        }
        (None, Some(export)) => {
            let valid = export.split_once(":/").is_some_and(|(host, path)| {
                !host.is_empty()
                    && check_path(&format!("/{path}")).is_ok()
                    && !host.contains(char::is_whitespace)
            });
            if !valid {
                return Err(bad(
                    "export",
                    format!("{export:?} is not an NFS export like host:/path"),
                ));
            }
            (export.to_owned(), version.map(|v| format!("vers={v}")))
        }
        _ => {
            return Err(bad(
                "share",
                "give exactly one of `share` and `export`".to_owned(),
            ));
        }
    };
    let options = match version_option {
        Some(version) => format!("{version},{NFS_OPTIONS}"),
        None => NFS_OPTIONS.to_owned(),
    };
    let vars = json!({
        "export": export,
        "options": options,
        "mount": p.path_or("mount", "/mnt/nfs")?,
        "cache_dir": p.path_or("cache_dir", "{temp}/fscache")?,
    });
    let request = b.request();
    b.push(Part::new(
        None,
        "nfs_cache.sh.j2",
        "NFS mount with FS-Cache",
        request.scope,
        request.policy,
        vars,
    ))
}

/// `script`: the user's own script, after the common prelude, with its `env` exported.
pub(super) fn script(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let text = p
        .text("script")?
        .ok_or_else(|| LibraryError::MissingParam {
            step: b.name().to_owned(),
            param: "script".into(),
        })?;
    let mut env = BTreeMap::new();
    match p.map.get("env") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            for (key, value) in map {
                let value = value.as_str().ok_or_else(|| LibraryError::BadParam {
                    step: b.name().to_owned(),
                    param: "env".into(),
                    why: format!("`{key}` must be text"),
                })?;
                let identifier = key
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !identifier || key.starts_with("DSINFRA_") {
                    return Err(LibraryError::BadParam {
                        step: b.name().to_owned(),
                        param: "env".into(),
                        why: format!(
                            "`{key}` must be a shell variable name not starting with DSINFRA_"
                        ),
                    });
                }
                env.insert(key.clone(), value.to_owned());
            }
        }
        Some(other) => {
            return Err(LibraryError::BadParam {
                step: b.name().to_owned(),
                param: "env".into(),
                why: format!("expected a map of text, got {other}"),
            });
        }
    }
    let vars = json!({ "script": text, "env_names": env.keys().collect::<Vec<_>>() });
    let request = b.request();
    let mut part = Part::new(
        None,
        "script.sh.j2",
        "your script",
        request.scope,
        request.policy,
        vars,
    );
    part.env = env;
    part.check = p.text("check")?.map(str::to_owned);
    if let Some(sas) = p.text("sas")? {
        let credential = b
            .ctx()
            .credentials
            .get(sas)
            .ok_or_else(|| b.unresolved(sas, "a SAS"))?;
        part.secrets.push(secret_input(SCRIPT_SAS, credential));
    }
    if let Some(account) = p.text("storage_key")? {
        let account = super::account_address(account);
        let credential = b
            .ctx()
            .credentials
            .get(&account)
            .ok_or_else(|| b.unresolved(&account, "the storage account key"))?;
        part.secrets
            .push(secret_input(SCRIPT_STORAGE_KEY, credential));
    }
    b.push(part)?;
    script_fetches(b)
}

/// The file under `$DSINFRA_SECRETS` a `script` step's `sas` arrives in.
pub const SCRIPT_SAS: &str = "sas";

/// The file under `$DSINFRA_SECRETS` a `script` step's `storage_key` arrives in.
pub const SCRIPT_STORAGE_KEY: &str = "storage_key";

/// The directory below `.dsinfra/<manifest>/` that `script` steps' `fetch` files go to:
/// `fetched/<step>/<node>/<file name>`.
pub const FETCHED_DIR: &str = "fetched";

/// A `script` step's `fetch`: each listed file, from every node the step runs on, back to
/// `fetched/<step>/<node>/<file name>` after the run.
fn script_fetches(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let bad = |why: String| LibraryError::BadParam {
        step: b.name().to_owned(),
        param: "fetch".into(),
        why,
    };
    let paths: Vec<String> = match b.params().map.get("fetch") {
        None | Some(serde_json::Value::Null) => return Ok(()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("expected a list of paths".into()))?,
        Some(other) => return Err(bad(format!("expected a list of paths, got {other}"))),
    };
    let mut names = std::collections::BTreeSet::new();
    for path in &paths {
        let file = path.rsplit('/').next().unwrap_or_default();
        if !path.starts_with('/')
            || path.split('/').any(|c| c == "..")
            || file.is_empty()
            || file == "."
            || !names.insert(file)
        {
            return Err(bad(format!(
                "{path:?} must be an absolute path to a file, without `..`, its file name used once"
            )));
        }
    }
    let step = b.step_name(None);
    let count = match b.request().scope {
        Scope::Head => 1,
        Scope::All => b.ctx().nodes.len(),
    };
    let nodes: Vec<(usize, String)> = b
        .ctx()
        .nodes
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, n)| (i, n.name.clone()))
        .collect();
    for (node, name) in nodes {
        for path in &paths {
            let file = path.rsplit('/').next().unwrap_or_default();
            b.fetch(Fetch {
                after_step: step.clone(),
                node,
                remote: path.clone(),
                local: format!("{FETCHED_DIR}/{step}/{name}/{file}"),
                results: None,
            });
        }
    }
    Ok(())
}
