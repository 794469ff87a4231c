//! The built-in post-boot step kinds and their parameters: one table, so adding a kind or a
//! parameter is one entry here (the runner that executes them lives elsewhere and reads the same
//! names). Defaults follow shared/reference/steps.md. `{temp}` in a default stands for the VM's
//! temp disk (`/mnt` or `/mnt/resource`), which the runner resolves on the node because it differs
//! between images.

use crate::model::{RunPolicy, StepScope};

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    /// Text.
    Text,
    /// A whole number >= 0.
    Int,
    /// true / false.
    Bool,
    /// An absolute path on the node.
    Path,
    /// A reference to a blob container (`storage_account.X.container.Y`).
    Container,
    /// A reference to a file share (`storage_account.X.file_share.Y`).
    Share,
    /// A reference to a `sas` block.
    Sas,
    /// A reference to a storage account (`storage_account.X`): the step gets its key.
    Account,
    /// A list of absolute paths on the node.
    PathList,
    /// A map of text (environment variables).
    TextMap,
    /// A whole number >= 1, or a non-empty list of them (a sweep axis: `threads = [1, 4]`).
    Counts,
    /// One size (`"4M"`): digits and an optional K, M, G or T.
    Size,
    /// A size or a non-empty list of sizes (a sweep axis: `block_sizes = ["256K", "4M"]`).
    Sizes,
    /// A non-empty list of distinct absolute directories on the node.
    Dirs,
}

/// A parameter's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Def {
    /// Must be given.
    Required,
    /// Optional without a default (absent from the step's params).
    Unset,
    /// Text default.
    Text(&'static str),
    /// Number default.
    Int(i64),
    /// Bool default.
    Bool(bool),
}

/// One parameter of a step kind.
#[derive(Debug, Clone, Copy)]
pub(super) struct Param {
    /// Attribute name in the step block.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// Default.
    pub default: Def,
    /// One line for the docs and for "missing parameter" help.
    pub help: &'static str,
}

/// One step kind.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kind {
    /// The label in `step "<kind>" { ... }`.
    pub name: &'static str,
    /// What it does, in one line (docs/manifest.md lists it; a test keeps the two in step).
    #[cfg_attr(not(test), allow(dead_code))]
    pub summary: &'static str,
    /// Default run policy.
    pub run: RunPolicy,
    /// Default scope.
    pub scope: StepScope,
    /// Only meaningful on a cluster (several nodes).
    pub cluster_only: bool,
    /// Default timeout.
    pub timeout: &'static str,
    /// Parameters besides the common ones (`name`, `run`, `scope`, `timeout`).
    pub params: &'static [Param],
}

/// Attributes every step accepts.
pub(super) const COMMON: [&str; 4] = ["name", "run", "scope", "timeout"];

const fn p(name: &'static str, ty: Ty, default: Def, help: &'static str) -> Param {
    Param {
        name,
        ty,
        default,
        help,
    }
}

/// Every step kind.
pub(super) static KINDS: &[Kind] = &[
    Kind {
        name: "mofed",
        summary: "Mellanox OFED drivers for InfiniBand (skipped when the image has them)",
        run: RunPolicy::Once,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "45m",
        params: &[
            p(
                "version",
                Ty::Text,
                // steps::library::DOCA_VERSION (a test holds them equal).
                Def::Text("2.9.1"),
                "DOCA-OFED release (`2.9.1`) or MLNX_OFED version (`5.9-0.5.6.0.107`) installed when `ofed_info` is missing",
            ),
            p(
                "enable_ipoib",
                Ty::Bool,
                Def::Bool(true),
                "IP over InfiniBand on ib0 (waagent OS.EnableRDMA)",
            ),
            p(
                "hold_kernel",
                Ty::Bool,
                Def::Bool(true),
                "hold the kernel package so an update cannot break the modules",
            ),
        ],
    },
    Kind {
        name: "blobfuse2",
        summary: "mount a blob container with blobfuse2, file cache on the temp disk",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "15m",
        params: &[
            p(
                "container",
                Ty::Container,
                Def::Required,
                "the container to mount, e.g. storage_account.data.container.raw",
            ),
            p(
                "sas",
                Ty::Sas,
                Def::Unset,
                "authenticate with this SAS instead of the account key",
            ),
            p("mount", Ty::Path, Def::Text("/mnt/blob"), "mount point"),
            p(
                "cache_dir",
                Ty::Text,
                Def::Text("{temp}/blobfuse2"),
                "file cache directory (temp disk by default)",
            ),
            p(
                "cache_timeout_sec",
                Ty::Int,
                Def::Int(120),
                "seconds a cached file stays valid (0: always re-read)",
            ),
            p(
                "cache_size_gb",
                Ty::Int,
                Def::Unset,
                "cache size limit (default: most of the temp disk)",
            ),
            p(
                "attr_timeout_sec",
                Ty::Int,
                Def::Int(240),
                "seconds file attributes are cached by the kernel (the seed's attr_timeout)",
            ),
            p(
                "entry_timeout_sec",
                Ty::Int,
                Def::Int(240),
                "seconds directory entries are cached by the kernel (the seed's entry_timeout)",
            ),
            p(
                "negative_timeout_sec",
                Ty::Int,
                Def::Int(120),
                "seconds a missing file is remembered as missing (the seed's negative_timeout)",
            ),
            p("read_only", Ty::Bool, Def::Bool(false), "mount read-only"),
            p(
                "disable_compression",
                Ty::Bool,
                Def::Bool(false),
                "serve gzip content-encoded blobs as stored",
            ),
        ],
    },
    Kind {
        name: "blobfuse",
        summary: "mount a blob container with legacy blobfuse v1 (Ubuntu 20.04 only)",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "15m",
        params: &[
            p(
                "container",
                Ty::Container,
                Def::Required,
                "the container to mount",
            ),
            p("mount", Ty::Path, Def::Text("/mnt/blob"), "mount point"),
            p(
                "tmp_dir",
                Ty::Text,
                Def::Text("{temp}/blobfuse"),
                "blobfuse cache directory (emptied before mounting)",
            ),
            p(
                "file_cache_timeout_sec",
                Ty::Int,
                Def::Int(120),
                "seconds a cached file stays valid",
            ),
        ],
    },
    Kind {
        name: "azure_files",
        summary: "mount an Azure Files share (SMB 3.1.1 or NFS 4.1, from the share's protocol)",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "10m",
        params: &[
            p(
                "share",
                Ty::Share,
                Def::Required,
                "the share to mount, e.g. storage_account.data.file_share.scratch",
            ),
            p("mount", Ty::Path, Def::Text("/mnt/share"), "mount point"),
        ],
    },
    Kind {
        name: "nfs_cache",
        summary: "mount an NFS export with a local FS-Cache (cachefilesd) on the temp disk",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "10m",
        params: &[
            p(
                "share",
                Ty::Share,
                Def::Unset,
                "an NFS file share of this manifest (or give `export`)",
            ),
            p(
                "export",
                Ty::Text,
                Def::Unset,
                "an external export, `host:/path` (or give `share`)",
            ),
            p("mount", Ty::Path, Def::Text("/mnt/nfs"), "mount point"),
            p(
                "cache_dir",
                Ty::Text,
                Def::Text("{temp}/fscache"),
                "cachefilesd directory",
            ),
            p(
                "version",
                Ty::Text,
                Def::Unset,
                "NFS version: 3, 4, 4.0, 4.1 or 4.2 (default: what the server offers; 4.1 for a share)",
            ),
        ],
    },
    Kind {
        name: "ssh_mesh",
        summary: "passwordless root SSH from the head to every node, and a nodefile (head first)",
        run: RunPolicy::Once,
        scope: StepScope::All,
        cluster_only: true,
        timeout: "10m",
        params: &[
            p(
                "prefer_infiniband",
                Ty::Bool,
                Def::Bool(true),
                "list ib0 addresses in the nodefile when present",
            ),
            p(
                "nodefile",
                Ty::Path,
                Def::Text("/etc/dsinfra/nodefile"),
                "where the nodefile is written",
            ),
        ],
    },
    Kind {
        name: "beeond",
        summary: "BeeGFS on demand across the nodes' temp disks (sets up the SSH mesh itself)",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: true,
        timeout: "30m",
        params: &[
            p(
                "mount",
                Ty::Path,
                Def::Text("/mnt/scratch"),
                "where the shared scratch file system is mounted",
            ),
            p(
                "data_dir",
                Ty::Text,
                Def::Text("{temp}/beeond"),
                "storage directory on each node",
            ),
            p(
                "version",
                Ty::Text,
                Def::Text("7.4.6"),
                "BeeGFS version (7.4.x: 8.x dropped helperd)",
            ),
            p(
                "interface",
                Ty::Text,
                Def::Unset,
                "network interface (default: ib0 on InfiniBand sizes, else eth0)",
            ),
            p(
                "nodefile",
                Ty::Path,
                Def::Text("/etc/dsinfra/nodefile"),
                "nodefile shared with `ssh_mesh`",
            ),
        ],
    },
    Kind {
        name: "stage",
        summary: "copy a dataset from a blob container with azcopy, sharded across the nodes",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "2h",
        params: &[
            p(
                "from",
                Ty::Container,
                Def::Required,
                "source container, e.g. storage_account.data.container.raw",
            ),
            p(
                "sas",
                Ty::Sas,
                Def::Unset,
                "read with this SAS (needs r and l permissions)",
            ),
            p(
                "prefix",
                Ty::Text,
                Def::Text(""),
                "only blobs under this prefix",
            ),
            p(
                "include",
                Ty::Text,
                Def::Unset,
                "only file names matching these patterns (`*.gz;*.tfrecord`)",
            ),
            p(
                "to",
                // Text, not Path: `{temp}/data` (the local temp disk, resolved on the node) is the
                // single-VM "copy to local SSD" mode.
                Ty::Text,
                Def::Text("/mnt/scratch/data"),
                "destination directory: absolute, or `{temp}/...` for the node's temp disk",
            ),
            p(
                "decompress",
                Ty::Bool,
                Def::Bool(false),
                "gunzip blobs stored with Content-Encoding: gzip",
            ),
            p(
                "shard",
                Ty::Bool,
                Def::Bool(true),
                "each node copies its share of the files (by size)",
            ),
            p(
                "concurrency",
                Ty::Int,
                Def::Unset,
                "azcopy concurrency (AZCOPY_CONCURRENCY_VALUE)",
            ),
        ],
    },
    Kind {
        name: "elbencho",
        summary: "storage benchmark across the nodes (results as CSV on the head)",
        run: RunPolicy::Once,
        scope: StepScope::Head,
        cluster_only: false,
        timeout: "1h",
        params: &[
            p(
                "dir",
                Ty::Path,
                Def::Text("/mnt/scratch/elbencho"),
                "directory to benchmark",
            ),
            p(
                "threads",
                Ty::Counts,
                Def::Int(8),
                "threads per node, or a list to sweep ([1, 4, 16, 64])",
            ),
            p(
                "files",
                Ty::Counts,
                Def::Int(128),
                "files per thread, or a list to sweep",
            ),
            p("file_size", Ty::Text, Def::Text("64M"), "size of each file"),
            p("block_size", Ty::Text, Def::Text("4M"), "I/O block size"),
            p(
                "file_sizes",
                Ty::Sizes,
                Def::Unset,
                "file sizes to sweep ([\"1M\", \"64M\"]), instead of `file_size`",
            ),
            p(
                "block_sizes",
                Ty::Sizes,
                Def::Unset,
                "block sizes to sweep ([\"256K\", \"4M\"]), instead of `block_size`",
            ),
            p(
                "csv",
                Ty::Path,
                Def::Text("/var/log/dsinfra/elbencho.csv"),
                "result file on the head",
            ),
        ],
    },
    Kind {
        name: "storage_bench",
        summary: "the same files written, read cold and read warm on several paths of one node, with fio",
        run: RunPolicy::Once,
        scope: StepScope::Head,
        cluster_only: false,
        timeout: "1h",
        params: &[
            p(
                "paths",
                Ty::Dirs,
                Def::Required,
                "directories to compare ([\"/mnt/resource\", \"/mnt/blob\"])",
            ),
            p("files", Ty::Int, Def::Int(16), "files per thread"),
            p("file_size", Ty::Size, Def::Text("16M"), "size of each file"),
            p("block_size", Ty::Size, Def::Text("1M"), "I/O block size"),
            p(
                "threads",
                Ty::Int,
                Def::Int(1),
                "fio jobs (threads) per path",
            ),
            p(
                "drop_caches",
                Ty::Bool,
                Def::Bool(true),
                "drop the page cache before the cold read (needs root)",
            ),
            p(
                "results",
                Ty::Path,
                Def::Text("/var/log/dsinfra/storage_bench.txt"),
                "result file on the node",
            ),
        ],
    },
    Kind {
        name: "alluxio",
        summary: "Alluxio with a FUSE mount over a blob container (master on the head)",
        run: RunPolicy::PerBoot,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "30m",
        params: &[
            p(
                "container",
                Ty::Container,
                Def::Required,
                "under-store container",
            ),
            p(
                "mount",
                Ty::Path,
                Def::Text("/alluxio-fuse"),
                "FUSE mount point",
            ),
            p(
                "memory_gb",
                Ty::Int,
                Def::Int(10),
                "worker memory tier size per node",
            ),
            p("version", Ty::Text, Def::Text("2.9.4"), "Alluxio version"),
        ],
    },
    Kind {
        name: "script",
        summary: "your own shell script, inline or from a file next to the manifest",
        run: RunPolicy::Once,
        scope: StepScope::All,
        cluster_only: false,
        timeout: "30m",
        params: &[
            p(
                "script",
                Ty::Text,
                Def::Unset,
                "the script text (use a heredoc: <<EOT ... EOT)",
            ),
            p(
                "file",
                Ty::Text,
                Def::Unset,
                "a script file, relative to the manifest",
            ),
            p(
                "env",
                Ty::TextMap,
                Def::Unset,
                "environment variables for the script",
            ),
            p(
                "check",
                Ty::Text,
                Def::Unset,
                "an \"already done?\" command: when it exits 0 the script is skipped",
            ),
            p(
                "sas",
                Ty::Sas,
                Def::Unset,
                "a SAS the script reads from the file $DSINFRA_SECRETS/sas",
            ),
            p(
                "storage_key",
                Ty::Account,
                Def::Unset,
                "a storage account whose key the script reads from $DSINFRA_SECRETS/storage_key",
            ),
            p(
                "fetch",
                Ty::PathList,
                Def::Unset,
                "files on the nodes copied back to .dsinfra/<manifest>/fetched/ after the steps",
            ),
        ],
    },
];

/// The NFS versions `nfs_cache` accepts in `version` (the step library's
/// `steps::library::NFS_VERSIONS`; a test keeps the two equal).
pub(super) const NFS_VERSIONS: [&str; 5] = ["3", "4", "4.0", "4.1", "4.2"];

/// The kind called `name`.
pub(super) fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// Every kind's name, for "did you mean".
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for kind in KINDS {
            let mut names: Vec<&str> = kind.params.iter().map(|p| p.name).collect();
            names.extend(COMMON);
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), count, "duplicate parameter in {}", kind.name);
            assert!(super::super::validate::time::parse_duration(kind.timeout).is_ok());
            for param in kind.params {
                if let (Ty::Path, Def::Text(path)) = (param.ty, param.default) {
                    assert!(
                        path.starts_with('/'),
                        "{}.{} default is absolute",
                        kind.name,
                        param.name
                    );
                }
            }
        }
        assert!(kind("beeond").is_some_and(|k| k.cluster_only));
        assert!(kind("nope").is_none());
        assert_eq!(NFS_VERSIONS, crate::steps::library::NFS_VERSIONS);
        let mofed = kind("mofed").expect("mofed");
        let version = mofed
            .params
            .iter()
            .find(|p| p.name == "version")
            .expect("version");
        assert!(
            matches!(version.default, Def::Text(v) if v == crate::steps::library::DOCA_VERSION),
            "the manifest's default DOCA-OFED release is the library's"
        );
    }
}
