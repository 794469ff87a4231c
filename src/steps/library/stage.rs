//! `stage`: copy a blob prefix to a directory on the nodes with azcopy, each node its own shard.
//!
//! dsinfra lists the blobs once on the workstation (the engine passes the listing in
//! [`NodeContext::listings`](super::NodeContext)) and assigns them to ranks by size
//! ([`super::shard::by_size`]). Each node receives only its own list, as the step file
//! [`SHARD_FILE`] (`$DSINFRA_FILES/shard.tsv`, see [`StepFile`]), never in the script text: a
//! dataset of 300,000 blobs over 64 nodes would otherwise put every rank's list, tens of MB, into
//! every node's script. The script holds only a digest of the whole assignment. The node hands
//! its list to azcopy with `--list-of-files`. Before copying, a
//! node drops the entries already present at the destination, so a re-run copies nothing and
//! does not even start azcopy; `--overwrite=false` is kept as a second guard. A per-rank done
//! marker (holding a digest of the whole assignment) in `<to>/.dsinfra-stage/` is the step's
//! "already done?" check, and a per-rank `.copied` file records what the rank wrote.
//!
//! Measured with azcopy 10.32.2 (tests/step_library.rs): `--decompress` gunzips blobs stored
//! with `Content-Encoding: gzip` but keeps their `.gz` name, so the script renames them; with a
//! source `CONTAINER/DIR/*`, list entries are relative to `DIR/` and land at the same relative
//! path under the destination.

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{TimeDelta, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::shard::{self, Item};
use super::{Builder, Credential, CredentialKind, LibraryError, Part, secret_input};
use crate::steps::spec::{FileContent, StepFile};
use crate::storage::{AccountKey, BlobItem, Permissions, SasSpec};

/// The step file holding a node's shard: one line per file, `stored bytes<TAB>path under the
/// source directory<TAB>local path under the destination`.
pub const SHARD_FILE: &str = "shard.tsv";

/// The default destination.
pub(super) const DEFAULT_TO: &str = "/mnt/scratch/data";

/// The oldest azcopy the step accepts: `--decompress` did nothing on Linux in 10.20.1
/// (Azure/azure-storage-azcopy#2392).
pub const AZCOPY_MIN_VERSION: &str = "10.21.0";

/// The azcopy version installed from packages.microsoft.com when a node has none.
pub const AZCOPY_PIN: &str = "10.27.1";

/// One rank's share of a staged dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageShard {
    /// The rank (0 = head).
    pub rank: usize,
    /// `(path relative to the source directory, local path relative to the destination, size)`.
    pub entries: Vec<(String, String, u64)>,
    /// Stored bytes the rank copies.
    pub bytes: u64,
}

/// What a stage copies: the source directory inside the container (the prefix up to its last
/// `/`) and each rank's shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePlan {
    /// The directory part of the prefix (`a/b/` for prefix `a/b/c`), source of relative paths.
    pub source_dir: String,
    /// One shard per rank.
    pub shards: Vec<StageShard>,
}

/// Assigns the listed blobs under `prefix` that match `include` to `ranks` shards by size.
/// With `decompress`, gzip content-encoded `.gz` blobs land without their `.gz`. Refuses blob
/// names that cannot travel in the line-based list (tabs, newlines) or would escape the
/// destination (`..`), and two blobs that would land on the same local path.
pub fn stage_shards(
    listing: &[BlobItem],
    prefix: &str,
    include: Option<&str>,
    ranks: usize,
    decompress: bool,
) -> Result<StagePlan, String> {
    let source_dir = prefix
        .rfind('/')
        .map_or(String::new(), |i| prefix[..=i].to_owned());
    // Sized for CosmoFlow's 300,000 blobs: local paths are borrowed from the listing, and each
    // name is allocated once and moved into its shard (planning them takes well under 1 s,
    // benches/shard_balance.rs).
    let mut items = Vec::with_capacity(listing.len());
    let mut locals: Vec<&str> = Vec::with_capacity(listing.len());
    let mut seen: HashMap<&str, &str> = HashMap::with_capacity(listing.len());
    for blob in listing {
        if blob.snapshot.is_some() || !blob.name.starts_with(prefix) || blob.name.ends_with('/') {
            continue;
        }
        if include.is_some_and(|patterns| !shard::matches_any(patterns, &blob.name)) {
            continue;
        }
        let relative = &blob.name[source_dir.len()..];
        if relative.chars().any(char::is_control)
            || relative.starts_with('/')
            || relative
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty())
        {
            return Err(format!(
                "blob {:?} cannot be staged: its name has control characters or empty, `.` or `..` path parts",
                blob.name
            ));
        }
        let gzip = blob
            .content_encoding
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case("gzip"));
        let local = match relative.strip_suffix(".gz") {
            Some(stem) if decompress && gzip && !stem.is_empty() && !stem.ends_with('/') => stem,
            _ => relative,
        };
        if let Some(first) = seen.insert(local, &blob.name) {
            return Err(format!(
                "blobs {first:?} and {:?} would both be written to {local:?}",
                blob.name
            ));
        }
        items.push(Item {
            name: relative.to_owned(),
            size: blob.size,
        });
        locals.push(local);
    }
    let assignment = shard::by_size(&items, ranks);
    // Every index is in exactly one shard: its name can be moved out rather than copied.
    let shards = assignment
        .into_iter()
        .enumerate()
        .map(|(rank, indices)| StageShard {
            rank,
            bytes: indices.iter().map(|&i| items[i].size).sum(),
            entries: indices
                .into_iter()
                .map(|i| {
                    let size = items[i].size;
                    (
                        std::mem::take(&mut items[i].name),
                        locals[i].to_owned(),
                        size,
                    )
                })
                .collect(),
        })
        .collect();
    Ok(StagePlan { source_dir, shards })
}

/// Percent-encodes each path segment, keeping the `/`s.
fn encode_path(path: &str) -> String {
    path.split('/')
        .map(crate::secret::percent_encode)
        .collect::<Vec<_>>()
        .join("/")
}

/// The SAS azcopy reads with: the step's `sas`, or a read+list container SAS signed from the
/// account key for as long as the step may run plus an hour.
fn stage_credential(
    b: &Builder<'_>,
    container: &str,
    endpoint: &str,
) -> Result<Credential, LibraryError> {
    let credential = b.credential("from", Some("sas"))?;
    match credential.kind {
        CredentialKind::Sas => Ok(credential.clone()),
        CredentialKind::AccountKey => {
            let account = &b.storage("from")?.account;
            let key = AccountKey::new(account, credential.value.expose())
                .map_err(|_| b.unsupported("the storage account key is not valid base64"))?;
            let lifetime = b
                .params()
                .timeout()?
                .and_then(|t| TimeDelta::from_std(t).ok())
                .unwrap_or(TimeDelta::hours(2));
            let token = SasSpec::container(container, Utc::now() + lifetime + TimeDelta::hours(1))
                .permissions(Permissions::READ_LIST)
                .https_only(endpoint.starts_with("https://"))
                .sign(&key)
                .map_err(|_| b.unsupported("cannot sign a SAS with the storage account key"))?;
            Ok(Credential {
                kind: CredentialKind::Sas,
                identity: format!("{} (read+list container SAS)", credential.identity),
                value: crate::ssh::Secret::new(token.expose_query()),
            })
        }
    }
}

/// Renders `stage`. `beegfs_gate` is the BeeOND mount the destination lies under, if any: the
/// script then refuses to copy unless it is really mounted as BeeGFS.
pub(super) fn stage(b: &mut Builder<'_>, beegfs_gate: Option<&str>) -> Result<(), LibraryError> {
    let p = b.params();
    let target = b.storage("from")?;
    let to = p.path_or("to", DEFAULT_TO)?;
    let prefix = p.text_or("prefix", "")?;
    let decompress = p.bool_or("decompress", false)?;
    let sharded = p.bool_or("shard", true)?;
    let concurrency = p.int("concurrency")?;
    let ranks = if sharded {
        b.ctx().nodes.len().max(1)
    } else {
        1
    };
    let from = p.required("from")?;
    let listing = b
        .ctx()
        .listings
        .get(b.name())
        .ok_or_else(|| b.unresolved(&format!("the blob listing of {from}"), "a listing"))?;
    let plan =
        stage_shards(listing, prefix, p.text("include")?, ranks, decompress).map_err(|why| {
            LibraryError::BadParam {
                step: b.name().to_owned(),
                param: "from".into(),
                why,
            }
        })?;
    let lists = shard_lists(&plan);
    // The digest covers every rank's list, so a node's done marker is stale as soon as any
    // part of the assignment changes (a new blob may move files between ranks).
    let mut hasher = Sha256::new();
    for (rank, list) in lists.iter().enumerate() {
        hasher.update(format!("rank {rank} {}\n", list.len()).as_bytes());
        hasher.update(list.as_bytes());
    }
    let digest = hex::encode(hasher.finalize());
    let source = format!(
        "{}/{}/{}*",
        target.blob_endpoint.trim_end_matches('/'),
        target.name,
        encode_path(&plan.source_dir)
    );
    let credential = stage_credential(b, &target.name, &target.blob_endpoint)?;
    let vars = json!({
        "source": source,
        "to": to,
        "decompress": decompress,
        "sharded": sharded,
        "ranks": ranks,
        "concurrency": concurrency,
        "files": plan.shards.iter().map(|s| s.entries.len()).sum::<usize>(),
        "bytes": plan.shards.iter().map(|s| s.bytes).sum::<u64>(),
        "digest": digest,
        "azcopy": b.ctx().azcopy,
        "azcopy_min": AZCOPY_MIN_VERSION,
        "azcopy_pin": AZCOPY_PIN,
        "beegfs_gate": beegfs_gate,
        // The gate asks BeeGFS through the beeond step kind's stand-in root when one is set.
        "root": if beegfs_gate.is_some() { super::cluster::beeond_root(b)? } else { String::new() },
    });
    let request = b.request();
    let mut part = Part::new(
        None,
        "stage.sh.j2",
        "stage a dataset with azcopy",
        request.scope,
        request.policy,
        vars,
    );
    part.secrets.push(secret_input("sas", &credential));
    part.files.push(StepFile {
        name: SHARD_FILE.to_owned(),
        content: if sharded {
            FileContent::ByRank(lists)
        } else {
            // Every node copies the whole dataset: one list, the same everywhere.
            FileContent::Same(lists.into_iter().next().unwrap_or_default())
        },
    });
    b.push(part)
}

/// Each rank's [`SHARD_FILE`] content.
fn shard_lists(plan: &StagePlan) -> Vec<String> {
    plan.shards
        .iter()
        .map(|shard| {
            let mut text = String::with_capacity(
                shard
                    .entries
                    .iter()
                    .map(|(blob, local, _)| blob.len() + local.len() + 24)
                    .sum(),
            );
            for (blob, local, size) in &shard.entries {
                let _ = writeln!(text, "{size}\t{blob}\t{local}");
            }
            text
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(name: &str, size: u64, gzip: bool) -> BlobItem {
        BlobItem {
            name: name.to_owned(),
            size,
            content_encoding: gzip.then(|| "gzip".to_owned()),
            snapshot: None,
        }
    }

    #[test]
    fn shards_are_relative_to_the_prefix_directory_and_strip_gz_only_when_encoded() {
        let listing = [
            blob("data/cosmo/a_000.tfrecord.gz", 30, true),
            blob("data/cosmo/a_001.tfrecord.gz", 20, false),
            blob("data/cosmo/sub/b.bin", 10, false),
            blob("data/other/c.gz", 99, true),
        ];
        let plan = stage_shards(&listing, "data/cosmo", None, 2, true).expect("valid listing");
        assert_eq!(plan.source_dir, "data/");
        assert_eq!(
            plan.shards[0].entries,
            [(
                "cosmo/a_000.tfrecord.gz".into(),
                "cosmo/a_000.tfrecord".into(),
                30
            )]
        );
        assert_eq!(
            plan.shards[1].entries,
            [
                (
                    "cosmo/a_001.tfrecord.gz".into(),
                    "cosmo/a_001.tfrecord.gz".into(),
                    20
                ),
                ("cosmo/sub/b.bin".into(), "cosmo/sub/b.bin".into(), 10),
            ]
        );
        let included = stage_shards(&listing, "data/", Some("*.bin"), 1, false).expect("valid");
        assert_eq!(included.shards[0].entries.len(), 1);
    }

    #[test]
    fn unsafe_or_colliding_names_are_refused() {
        let tab = [blob("x/a\tb", 1, false)];
        assert!(stage_shards(&tab, "", None, 1, false).is_err());
        let escape = [blob("x/../../etc/passwd", 1, false)];
        assert!(stage_shards(&escape, "", None, 1, false).is_err());
        let collide = [blob("a.gz", 1, true), blob("a", 1, false)];
        assert_eq!(
            stage_shards(&collide, "", None, 1, true).err().as_deref(),
            Some("blobs \"a.gz\" and \"a\" would both be written to \"a\"")
        );
        assert!(stage_shards(&collide, "", None, 1, false).is_ok());
    }

    #[test]
    fn source_paths_are_percent_encoded_per_segment() {
        assert_eq!(encode_path("a b/c%/"), "a%20b/c%25/");
        assert_eq!(encode_path(""), "");
    }
}
