//! Replacing a file so that a crash leaves the old version or the new one, never half of one.
//!
//! The state (`state::LocalBackend`, which also keeps a backup) and saved plans (`plan -out`)
//! are written this way: the bytes go to a temporary file in the same directory (a rename is
//! only atomic within one file system), which is fsynced, then renamed over the target; the
//! directory is fsynced so that the rename itself survives a power loss. The emulator's own
//! store keeps a copy of this logic on purpose: it is a test double that must not depend on the
//! code it tests.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// A step of an atomic write failed.
#[derive(Debug, thiserror::Error)]
#[error("could not {action} {}: {source}", path.display())]
pub struct Error {
    /// What was being done: "write", "replace" or "sync directory".
    pub action: &'static str,
    /// The file or directory involved.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

/// Writes `bytes` to `path` atomically and durably: [`replace`], then [`sync_dir`] of its
/// directory.
///
/// # Errors
///
/// Writing the temporary file, renaming it or syncing the directory failed; `path` is then
/// unchanged (or, for a failed directory sync, replaced but perhaps not yet durable).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    replace(path, bytes)?;
    sync_dir(directory_of(path))
}

/// [`write`] for a credential (a kubeconfig): the file is made with mode 0600 from its first byte
/// on, where the platform has modes, so no other user can read it even for an instant (a chmod
/// after the write would leave that instant open).
///
/// # Errors
///
/// As [`write`].
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    replace_with(path, bytes, Access::Private)?;
    sync_dir(directory_of(path))
}

/// Who may read the file a write makes.
#[derive(Clone, Copy)]
enum Access {
    /// As the process's umask says.
    Default,
    /// Its owner only (0600).
    Private,
}

/// Writes `bytes` to a temporary sibling of `path`, fsyncs it and renames it over `path`. The
/// directory is not synced: a caller replacing several files syncs it once at the end.
///
/// # Errors
///
/// Writing the temporary file or renaming it failed; the temporary file is removed and `path`
/// is unchanged.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    replace_with(path, bytes, Access::Default)
}

fn replace_with(path: &Path, bytes: &[u8], access: Access) -> Result<(), Error> {
    let tmp = temporary_sibling(path);
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if matches!(access, Access::Private) {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = access;
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(source) = written {
        let _ = fs::remove_file(&tmp);
        return Err(Error {
            action: "write",
            path: tmp,
            source,
        });
    }
    fs::rename(&tmp, path).map_err(|source| {
        let _ = fs::remove_file(&tmp);
        Error {
            action: "replace",
            path: path.to_owned(),
            source,
        }
    })
}

/// Makes the renames in `dir` durable. Directories cannot be opened for fsync on Windows, where
/// `MoveFileEx` is already write-through for this purpose, so this does nothing there.
///
/// # Errors
///
/// The directory cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| Error {
            action: "sync directory",
            path: dir.to_owned(),
            source,
        })?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// `dir/name.PID.tmp`: in the target's directory, and per process, so that two processes
/// writing the same file never write into one temporary file.
fn temporary_sibling(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    directory_of(path).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("the directory is readable")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn write_creates_then_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("plan.json");
        write(&path, b"first").expect("written");
        write(&path, b"second").expect("replaced");
        assert_eq!(fs::read(&path).expect("readable"), b"second");
        assert_eq!(names_in(dir.path()), ["plan.json"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_private_write_is_the_owners_alone_and_replaces_a_readable_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("kubeconfig-train");
        fs::write(&path, b"old").expect("written");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, b"token: new").expect("written");
        assert_eq!(fs::read(&path).expect("readable"), b"token: new");
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(names_in(dir.path()), ["kubeconfig-train"]);
    }

    #[test]
    fn a_failed_replace_keeps_the_old_file_and_cleans_up() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let target = dir.path().join("taken");
        fs::create_dir(&target).expect("a directory in the way");
        fs::write(target.join("inside"), "keep").expect("written");
        // Renaming a file over a non-empty directory fails on every platform.
        let err = replace(&target, b"new").expect_err("a directory cannot be replaced");
        assert_eq!(err.action, "replace");
        assert_eq!(err.path, target);
        assert!(
            err.to_string()
                .starts_with(&format!("could not replace {}: ", target.display())),
            "{err}"
        );
        assert_eq!(names_in(dir.path()), ["taken"]);
        assert_eq!(
            fs::read_to_string(target.join("inside")).expect("kept"),
            "keep"
        );
    }

    #[test]
    fn a_missing_directory_fails_at_the_write_naming_the_temporary_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("missing/plan.json");
        let err = write(&path, b"x").expect_err("no such directory");
        assert_eq!(err.action, "write");
        assert_eq!(err.path, temporary_sibling(&path));
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("plan.json")), Path::new("."));
        assert_eq!(
            temporary_sibling(Path::new("plan.json")),
            Path::new(".").join(format!("plan.json.{}.tmp", std::process::id()))
        );
    }
}
