//! Which SSH identity post-boot steps log in with.
//!
//! The order is the one users expect from OpenSSH, with explicit choices first: `-i FILE`, then
//! `$DSINFRA_SSH_IDENTITY` (CI), then the ssh-agent at `$SSH_AUTH_SOCK`, then `~/.ssh/id_ed25519`
//! and `~/.ssh/id_rsa`. When nothing is usable the error lists everything that was tried, so the
//! user sees at once which of the four to fix. The search is a pure function of its inputs
//! ([`Sources`]) so that the order and the message are unit-tested.

use std::path::{Path, PathBuf};

use crate::ssh::Auth;

/// The environment variable naming an identity file when `-i` is not given.
pub const IDENTITY_ENV: &str = "DSINFRA_SSH_IDENTITY";

/// What the search may look at.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `-i/--identity`.
    pub flag: Option<PathBuf>,
    /// `$DSINFRA_SSH_IDENTITY`, when set and not empty.
    pub env_identity: Option<PathBuf>,
    /// `$SSH_AUTH_SOCK`, when set and not empty.
    pub agent_socket: Option<PathBuf>,
    /// The user's home directory.
    pub home: Option<PathBuf>,
}

impl Sources {
    /// The sources of this process: `flag` and the environment.
    pub fn from_env(flag: Option<&Path>) -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            flag: flag.map(Path::to_path_buf),
            env_identity: var(IDENTITY_ENV),
            agent_socket: var("SSH_AUTH_SOCK"),
            home: var("HOME"),
        }
    }
}

/// Finds the identity to log in with. `load` reads a key file (the real one is
/// [`Auth::key_file`]); an explicit file (`-i` or the variable) that cannot be used is an error
/// of its own rather than a reason to fall back silently to another identity.
///
/// # Errors
///
/// The explicit file is unusable, or nothing was found; the message lists what was tried.
pub fn resolve(
    sources: &Sources,
    load: impl Fn(&Path) -> Result<Auth, String>,
    exists: impl Fn(&Path) -> bool,
) -> Result<Auth, String> {
    if let Some(path) = &sources.flag {
        return load(path).map_err(|e| format!("-i {}: {e}", path.display()));
    }
    if let Some(path) = &sources.env_identity {
        return load(path).map_err(|e| format!("{IDENTITY_ENV}={}: {e}", path.display()));
    }
    if let Some(socket) = &sources.agent_socket {
        return Ok(Auth::Agent {
            socket: socket.clone(),
        });
    }
    let mut tried = vec![
        "-i FILE (not given)".to_owned(),
        format!("{IDENTITY_ENV} (not set)"),
        "ssh-agent (SSH_AUTH_SOCK not set)".to_owned(),
    ];
    let home_ssh = sources.home.as_ref().map(|h| h.join(".ssh"));
    for file in ["id_ed25519", "id_rsa"] {
        let Some(dir) = &home_ssh else {
            tried.push(format!("~/.ssh/{file} (HOME not set)"));
            continue;
        };
        let path = dir.join(file);
        if !exists(&path) {
            tried.push(format!("{} (no such file)", path.display()));
            continue;
        }
        match load(&path) {
            Ok(auth) => return Ok(auth),
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(format!(
        "no SSH identity to log in to the VMs with; tried: {}",
        tried.join("; ")
    ))
}

/// [`resolve`] with the real key loader and file system.
///
/// # Errors
///
/// As [`resolve`].
pub fn identity(sources: &Sources) -> Result<Auth, String> {
    resolve(sources, Auth::key_file, Path::exists)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(path: &str) -> Auth {
        Auth::Agent {
            socket: PathBuf::from(path),
        }
    }

    fn describe(auth: &Auth) -> String {
        format!("{auth:?}")
    }

    #[test]
    fn explicit_choices_come_first_and_an_unusable_one_is_an_error() {
        let sources = Sources {
            flag: Some("/k/flag".into()),
            env_identity: Some("/k/env".into()),
            agent_socket: Some("/agent".into()),
            home: Some("/home/u".into()),
        };
        let found = resolve(&sources, |p| Ok(agent(&p.display().to_string())), |_| true)
            .expect("the flag's file loads");
        assert_eq!(describe(&found), "Auth::Agent(/k/flag)");
        let err = resolve(&sources, |_| Err("bad key".into()), |_| true)
            .expect_err("an explicit file that fails is an error");
        assert_eq!(err, "-i /k/flag: bad key");
        let no_flag = Sources {
            flag: None,
            ..sources.clone()
        };
        let err = resolve(&no_flag, |_| Err("bad key".into()), |_| true).expect_err("error");
        assert_eq!(err, "DSINFRA_SSH_IDENTITY=/k/env: bad key");
        let agent_only = Sources {
            env_identity: None,
            ..no_flag
        };
        let found = resolve(&agent_only, |_| Err("unused".into()), |_| true).expect("agent");
        assert_eq!(describe(&found), "Auth::Agent(/agent)");
    }

    #[test]
    fn default_files_are_tried_in_order_and_the_error_lists_everything() {
        let sources = Sources {
            home: Some("/home/u".into()),
            ..Sources::default()
        };
        let found = resolve(
            &sources,
            |p| Ok(agent(&p.display().to_string())),
            |p| p.ends_with("id_rsa"),
        )
        .expect("id_rsa exists");
        assert_eq!(describe(&found), "Auth::Agent(/home/u/.ssh/id_rsa)");
        let err = resolve(
            &sources,
            |_| Err("invalid format".into()),
            |p| p.ends_with("id_ed25519"),
        )
        .expect_err("nothing usable");
        assert_eq!(
            err,
            "no SSH identity to log in to the VMs with; tried: -i FILE (not given); \
             DSINFRA_SSH_IDENTITY (not set); ssh-agent (SSH_AUTH_SOCK not set); \
             /home/u/.ssh/id_ed25519 (invalid format); /home/u/.ssh/id_rsa (no such file)"
        );
    }
}
