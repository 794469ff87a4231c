//! The local backend: one state file per experiment manifest, under an OS lock.
//!
//! Layout, next to the manifest `exp.hcl`:
//!
//! ```text
//! .dsinfra/.gitignore          "*": state is per machine, not committed with the manifest
//! .dsinfra/exp/state.json      the current state
//! .dsinfra/exp/state.json.backup   the version before the last save
//! .dsinfra/exp/state.lock      locked with flock/LockFileEx while a command runs; holds its holder
//! ```
//!
//! The lock is an OS file lock (fs4), so it disappears with the process that held it, even after
//! `kill -9` or a power loss: there is never a stale lock to force-remove. The lock file is never
//! deleted, because a process could otherwise lock an unlinked file while another creates a new
//! one. A save makes the current `state.json` the backup (a second name for the same file, see
//! [`keep_backup`]), writes the new state to a temporary file in the same directory, fsyncs it,
//! renames it over `state.json` and fsyncs the directory, so a crash at any moment leaves either
//! the old or the new state in `state.json`, never a mix.
//!
//! Two fsyncs per save, and both are needed: the new file's data, or a power loss after the
//! rename could leave `state.json` empty or partly written (ext4 without `auto_da_alloc`, XFS);
//! and the directory, or the rename itself could be undone, so that an intent the engine has
//! acted on (a PUT sent) vanishes from the state and its resource becomes an orphan. The backup
//! needs none: it is not part of crash safety (only `state.json` is ever loaded), and its data
//! are already durable, being the previous state's.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt as _;
use futures::future::BoxFuture;

use super::backend::save_checked;
use super::{Backend, LockHolder, State, StateError};

const STATE_FILE: &str = "state.json";
const BACKUP_FILE: &str = "state.json.backup";
const LOCK_FILE: &str = "state.lock";

/// The state of one manifest in `.dsinfra/<manifest>/`, locked while this value lives.
#[derive(Debug)]
pub struct LocalBackend {
    dir: PathBuf,
    lock: File,
    holder: LockHolder,
    loaded_lineage: Option<String>,
}

impl LocalBackend {
    /// The state directory for a manifest: `.dsinfra/<stem>` in the manifest's directory.
    pub fn state_dir(manifest: &Path) -> Result<PathBuf, StateError> {
        let stem = manifest
            .file_stem()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| StateError::NoManifestStem {
                path: manifest.to_owned(),
            })?;
        let parent = manifest.parent().unwrap_or_else(|| Path::new(""));
        Ok(parent.join(".dsinfra").join(stem))
    }

    /// Open and lock the state of `manifest` on behalf of this process.
    pub fn open(manifest: &Path) -> Result<Self, StateError> {
        Self::open_as(manifest, LockHolder::this_process())
    }

    /// Open and lock the state of `manifest`, recording `holder` in the lock file. Fails at once
    /// with [`StateError::Locked`], naming the holder, if another process has it.
    ///
    /// # Panics
    ///
    /// Never: a [`LockHolder`] always serialises.
    pub fn open_as(manifest: &Path, holder: LockHolder) -> Result<Self, StateError> {
        let dir = Self::state_dir(manifest)?;
        let io_err = |action, path: &Path| {
            let path = path.to_owned();
            move |source| StateError::Io {
                action,
                path,
                source,
            }
        };
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        if let Some(root) = dir.parent() {
            let ignore = root.join(".gitignore");
            if !ignore.exists() {
                fs::write(&ignore, "*\n").map_err(io_err("write", &ignore))?;
            }
        }
        let lock_path = dir.join(LOCK_FILE);
        // Never truncate on open: the file may be another process's holder record.
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_err("open", &lock_path))?;
        let acquired = lock
            .try_lock_exclusive()
            .map_err(io_err("lock", &lock_path))?;
        if !acquired {
            let mut text = String::new();
            let holder = lock
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| serde_json::from_str(&text).ok());
            return Err(StateError::Locked {
                state: dir.join(STATE_FILE),
                holder,
            });
        }
        let record = serde_json::to_string(&holder).expect("a LockHolder always serialises");
        lock.set_len(0)
            .and_then(|()| lock.rewind())
            .and_then(|()| lock.write_all(record.as_bytes()))
            .and_then(|()| lock.sync_all())
            .map_err(io_err("write", &lock_path))?;
        Ok(Self {
            dir,
            lock,
            holder,
            loaded_lineage: None,
        })
    }

    /// The state file.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The backup of the previous version.
    pub fn backup_path(&self) -> PathBuf {
        self.dir.join(BACKUP_FILE)
    }

    /// Write `text` to `path` atomically: temporary file, fsync, rename (`crate::atomic_file`).
    fn replace_file(path: &Path, text: &[u8]) -> Result<(), StateError> {
        crate::atomic_file::replace(path, text).map_err(io_error)
    }

    /// Make the renames durable (once, after both the backup and the state were replaced).
    fn sync_dir(&self) -> Result<(), StateError> {
        crate::atomic_file::sync_dir(&self.dir).map_err(io_error)
    }
}

/// Makes the current state file (`state`) the backup, before a save replaces it; nothing to do
/// before the first save.
///
/// The backup becomes a second name for the current file: `link` (a hard link) under a temporary
/// name, renamed over the old backup. No byte is copied and nothing needs an fsync: the file's
/// data were made durable when it was saved as the state, and the save's closing directory fsync
/// makes the new name durable with the state's. Once the new state is renamed over `state.json`,
/// the backup is the only name of the old file, so nothing written to `state.json` later
/// reaches it. Where hard links are not supported (FAT, some network shares) the bytes are
/// copied instead, without an fsync: after a power loss that backup may be stale or empty, which
/// costs nothing, as it is a copy for people to restore by hand and is never loaded.
fn keep_backup(
    state: &Path,
    backup: &Path,
    link: impl FnOnce(&Path, &Path) -> io::Result<()>,
) -> Result<(), StateError> {
    let mut name = backup.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = backup.with_file_name(name);
    // A crashed save of an earlier process with this pid may have left it behind.
    let _ = fs::remove_file(&tmp);
    let io_err = |action, path: &Path| {
        let path = path.to_owned();
        move |source| StateError::Io {
            action,
            path,
            source,
        }
    };
    match link(state, &tmp) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound && !state.exists() => return Ok(()),
        Err(_) => {
            fs::copy(state, &tmp).map_err(io_err("copy", state))?;
        }
    }
    fs::rename(&tmp, backup).map_err(|source| {
        let _ = fs::remove_file(&tmp);
        io_err("replace", backup)(source)
    })
}

/// An atomic write's failure, in the state layer's error type.
fn io_error(e: crate::atomic_file::Error) -> StateError {
    StateError::Io {
        action: e.action,
        path: e.path,
        source: e.source,
    }
}

impl LocalBackend {
    fn read(&mut self) -> Result<Option<State>, StateError> {
        let path = self.state_path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let backup = self.backup_path();
                if backup.exists() {
                    return Err(StateError::MissingWithBackup { path, backup });
                }
                return Ok(None);
            }
            Err(source) => {
                return Err(StateError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let state = State::from_json(&text, &path)?;
        self.loaded_lineage = Some(state.lineage.clone());
        Ok(Some(state))
    }

    /// Write `state` (its serial already bumped) as the current version, keeping the previous
    /// one as the backup.
    fn write(&self, path: &Path, state: &State) -> Result<(), StateError> {
        let text = state.to_json();
        keep_backup(path, &self.backup_path(), |from, to| {
            fs::hard_link(from, to)
        })?;
        Self::replace_file(path, text.as_bytes())?;
        // Makes both renames (backup and state) durable.
        self.sync_dir()
    }

    /// Clear the holder record (so nobody reads a stale one) and unlock; both best effort,
    /// because the OS drops the lock with the file handle anyway.
    fn release(&self) {
        let _ = self.lock.set_len(0);
        let _ = fs4::fs_std::FileExt::unlock(&self.lock);
    }

    /// [`Backend::load`], done here and now: the local file needs no runtime (for tests and
    /// tools that hold a local state outside any async code).
    ///
    /// # Errors
    ///
    /// As [`Backend::load`].
    pub fn load_sync(&mut self) -> Result<Option<State>, StateError> {
        self.read()
    }

    /// [`Backend::save`], done here and now (see [`LocalBackend::load_sync`]).
    ///
    /// # Errors
    ///
    /// As [`Backend::save`].
    pub fn save_sync(&mut self, state: &mut State) -> Result<(), StateError> {
        futures::executor::block_on(Backend::save(self, state))
    }
}

/// Runs file I/O without stalling the runtime: in `block_in_place` on a multi-thread runtime
/// (its other tasks move to other threads first); directly elsewhere (a current-thread runtime,
/// which tests use, cannot hand its tasks to another thread, and outside a runtime there is
/// nothing to stall).
pub(crate) fn blocking<T>(io: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(io)
        }
        _ => io(),
    }
}

impl Backend for LocalBackend {
    fn location(&self) -> String {
        self.state_path().display().to_string()
    }

    fn load(&mut self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        let read = blocking(|| self.read());
        Box::pin(std::future::ready(read))
    }

    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let path = self.state_path();
            let loaded = self.loaded_lineage.clone();
            let this = &*self;
            save_checked(
                loaded.as_deref(),
                || path.clone(),
                state,
                async |state: &State| blocking(|| this.write(&path, state)),
            )
            .await?;
            self.loaded_lineage = Some(state.lineage.clone());
            Ok(())
        })
    }

    fn lock_holder(&self) -> &LockHolder {
        &self.holder
    }

    fn allow_lineage_change(&mut self) {
        self.loaded_lineage = None;
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        self.release();
        Box::pin(std::future::ready(Ok(())))
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        // After `unlock` this does it again, harmlessly; without it, this is the unlock.
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::DSINFRA_VERSION;
    use chrono::{DateTime, Utc};
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};

    const CHILD_ENV: &str = "DSINFRA_TEST_LOCK_CHILD_MANIFEST";

    fn fixed_holder(command: &str) -> LockHolder {
        LockHolder {
            since: DateTime::parse_from_rfc3339("2026-11-22T05:30:00Z")
                .expect("valid time")
                .with_timezone(&Utc),
            ..LockHolder::current(command)
        }
    }

    #[test]
    fn state_lives_next_to_the_manifest_per_stem() {
        assert_eq!(
            LocalBackend::state_dir(Path::new("exp/dual-dsvm.hcl")).expect("has a stem"),
            Path::new("exp/.dsinfra/dual-dsvm")
        );
        assert_eq!(
            LocalBackend::state_dir(Path::new("nd40.hcl")).expect("has a stem"),
            Path::new(".dsinfra/nd40")
        );
        let err = LocalBackend::state_dir(Path::new("/")).expect_err("no stem");
        assert_eq!(
            err.to_string(),
            "cannot find a state location for /: the path has no file name"
        );
    }

    #[test]
    fn saves_bump_the_serial_and_keep_the_previous_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut backend = LocalBackend::open(&manifest).expect("lock");
        assert_eq!(backend.load_sync().expect("no state yet"), None);
        let mut state = State::new("exp");
        state.dsinfra_version = "0.0.1".to_owned();
        backend.save_sync(&mut state).expect("first save");
        assert_eq!(state.serial, 1);
        assert_eq!(state.dsinfra_version, DSINFRA_VERSION);
        assert!(!backend.backup_path().exists());
        state
            .outputs
            .insert("ip".to_owned(), serde_json::Value::from("10.0.0.4"));
        backend.save_sync(&mut state).expect("second save");
        assert_eq!(state.serial, 2);
        let backup = State::from_json(
            &fs::read_to_string(backend.backup_path()).expect("backup written"),
            &backend.backup_path(),
        )
        .expect("backup parses");
        assert_eq!(backup.serial, 1);
        assert!(backup.outputs.is_empty());
        assert_eq!(backend.load_sync().expect("loads"), Some(state.clone()));
        assert_eq!(
            fs::read_to_string(dir.path().join(".dsinfra/.gitignore")).expect("written"),
            "*\n"
        );
        // No temporary file is left behind.
        let names: Vec<String> = fs::read_dir(dir.path().join(".dsinfra/exp"))
            .expect("listable")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| Path::new(n).extension().is_none_or(|e| e != "tmp")),
            "{names:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_backup_is_the_previous_state_file_itself_not_a_copy() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut backend = LocalBackend::open(&dir.path().join("exp.hcl")).expect("lock");
        let mut state = State::new("exp");
        backend.save_sync(&mut state).expect("first save");
        let first = fs::metadata(backend.state_path()).expect("saved").ino();
        backend.save_sync(&mut state).expect("second save");
        let backup = fs::metadata(backend.backup_path()).expect("backup kept");
        assert_eq!(backup.ino(), first, "the backup was copied, not linked");
        assert_eq!(backup.nlink(), 1, "the backup still shares its file");
        assert_ne!(
            fs::metadata(backend.state_path()).expect("saved").ino(),
            first
        );
    }

    #[test]
    fn without_hard_links_the_backup_is_a_copy_and_the_first_save_needs_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (state, backup) = (dir.path().join("state.json"), dir.path().join("backup"));
        let unsupported = |_: &Path, _: &Path| Err(io::Error::from(io::ErrorKind::Unsupported));
        keep_backup(&state, &backup, |from, to| fs::hard_link(from, to)).expect("no state yet");
        assert!(!backup.exists());
        fs::write(&state, "v1").expect("written");
        keep_backup(&state, &backup, unsupported).expect("copied");
        fs::write(&state, "v2").expect("written");
        assert_eq!(fs::read_to_string(&backup).expect("kept"), "v1");
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .expect("listable")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["backup", "state.json"]);
    }

    #[test]
    fn a_failed_save_leaves_serial_and_refuses_another_lineage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut backend = LocalBackend::open(&manifest).expect("lock");
        let mut state = State::new("exp");
        backend.save_sync(&mut state).expect("saved");
        let mut other = State::new("exp");
        let err = backend.save_sync(&mut other).expect_err("other lineage");
        assert_eq!(other.serial, 0);
        assert_eq!(
            err.to_string(),
            format!(
                "refusing to save state of lineage {} over {} which holds lineage {}: they are different histories; this is a dsinfra bug, please report it",
                other.lineage,
                backend.state_path().display(),
                state.lineage
            )
        );
    }

    #[test]
    fn a_missing_state_with_a_backup_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut backend = LocalBackend::open(&manifest).expect("lock");
        let mut state = State::new("exp");
        backend.save_sync(&mut state).expect("saved");
        backend.save_sync(&mut state).expect("saved again");
        fs::remove_file(backend.state_path()).expect("removed");
        let err = backend.load_sync().expect_err("missing");
        let (p, b) = (backend.state_path(), backend.backup_path());
        assert_eq!(
            err.to_string(),
            format!(
                "the state file {} is missing but its backup {} exists: if you did not delete the state on purpose, restore it with `mv {} {}`; to start over, delete the backup too",
                p.display(),
                b.display(),
                b.display(),
                p.display()
            )
        );
    }

    #[test]
    fn a_corrupt_or_newer_state_file_is_refused_by_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut backend = LocalBackend::open(&manifest).expect("lock");
        fs::write(
            backend.state_path(),
            "{\n  \"format_version\": 1,\n  oops\n}\n",
        )
        .expect("written");
        let err = backend.load_sync().expect_err("corrupt");
        assert_eq!(
            err.to_string(),
            format!(
                "the state file {} is corrupt: key must be a string at line 3, column 3; if it was not edited by hand, the previous version is in state.json.backup next to it",
                backend.state_path().display()
            )
        );
        fs::write(
            backend.state_path(),
            r#"{"format_version": 2, "dsinfra_version": "0.9.0"}"#,
        )
        .expect("written");
        let err = backend.load_sync().expect_err("newer");
        assert!(
            err.to_string()
                .contains("has format version 2 (written by dsinfra 0.9.0)"),
            "{err}"
        );
    }

    #[test]
    fn the_lock_is_released_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let first = LocalBackend::open_as(&manifest, fixed_holder("dsinfra plan exp.hcl"))
            .expect("first lock");
        // flock conflicts between two open file descriptions even within one process.
        let err = LocalBackend::open(&manifest).expect_err("held");
        assert!(
            err.to_string()
                .contains("running `dsinfra plan exp.hcl` since 2026-11-22T05:30:00Z"),
            "{err}"
        );
        drop(first);
        let lock_text =
            fs::read_to_string(dir.path().join(".dsinfra/exp/state.lock")).expect("lock file");
        assert_eq!(lock_text, "", "the holder record is cleared on release");
        LocalBackend::open(&manifest).expect("free again");
    }

    /// Not a test on its own: the child process of `a_second_process_is_refused_with_the_holder`.
    /// It locks the state named by the environment, says so on stdout, and holds the lock until
    /// its stdin closes or it is killed.
    #[test]
    #[ignore = "run only as the child of a_second_process_is_refused_with_the_holder"]
    fn lock_holder_child() {
        let manifest = std::env::var(CHILD_ENV).expect("run by the parent test with the env set");
        let backend =
            LocalBackend::open_as(Path::new(&manifest), fixed_holder("dsinfra apply exp.hcl"))
                .expect("the child takes the lock first");
        // libtest prints `test NAME ... ` on the same line before the test runs; the marker is
        // matched as a suffix for that reason.
        println!("DSINFRA-CHILD-LOCKED");
        io::stdout().flush().expect("stdout is a pipe");
        let mut rest = String::new();
        let _ = io::stdin().read_to_string(&mut rest);
        drop(backend);
    }

    #[test]
    fn a_second_process_is_refused_with_the_holder_and_freed_when_it_dies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "state::local::tests::lock_holder_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &manifest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child test");
        // Read the child's stdout on a thread so a child that never locks fails the test after a
        // timeout instead of hanging it.
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let locked = BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.ends_with("DSINFRA-CHILD-LOCKED"));
            let _ = tx.send(locked);
        });
        let locked = rx.recv_timeout(std::time::Duration::from_mins(1));
        if locked != Ok(true) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child never reported holding the lock: {locked:?}");
        }

        let err = LocalBackend::open(&manifest).expect_err("the child holds the lock");
        let me = LockHolder::current("");
        assert_eq!(
            err.to_string(),
            format!(
                "the state {} is locked by another dsinfra process: pid {}, user {} on host {}, running `dsinfra apply exp.hcl` since 2026-11-22T05:30:00Z; wait for it to finish (the operating system releases the lock when that process exits, even if it crashes)",
                dir.path().join(".dsinfra/exp/state.json").display(),
                child.id(),
                me.user,
                me.host
            )
        );

        // A crash (SIGKILL: no destructor runs) still frees the lock.
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        let backend = LocalBackend::open(&manifest).expect("free after the holder died");
        assert_eq!(backend.lock_holder().pid, std::process::id());
    }
}
