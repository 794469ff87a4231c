//! Who holds a state lock, recorded so that a second process can say who is in its way.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The process holding a state lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// User name.
    pub user: String,
    /// The command line that took the lock (`dsinfra apply exp.hcl`).
    pub command: String,
    /// When the lock was taken.
    pub since: DateTime<Utc>,
}

impl LockHolder {
    /// This process, running `command`, from now on.
    pub fn current(command: &str) -> Self {
        Self {
            pid: std::process::id(),
            host: host_name(),
            user: user_name(),
            command: command.to_owned(),
            since: Utc::now(),
        }
    }

    /// This process, described by its program name and subcommand only (`dsinfra apply`).
    ///
    /// The rest of the command line is left out on purpose: the lock file and the "locked by"
    /// message are readable by others, and `-var` values may be secrets.
    pub fn this_process() -> Self {
        Self::current(&describe_command(std::env::args()))
    }

    /// One line for messages: `pid 4242, user alice on host lab1, running `dsinfra apply
    /// exp.hcl` since 2026-11-22T05:30:00Z`.
    pub fn describe(&self) -> String {
        format!(
            "pid {}, user {} on host {}, running `{}` since {}",
            self.pid,
            self.user,
            self.host,
            self.command,
            self.since.to_rfc3339_opts(SecondsFormat::Secs, true)
        )
    }
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

fn user_name() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "unknown-user".to_owned())
}

/// `program subcommand` from a command line: the program's file name and the first argument if
/// it is a word (a subcommand), nothing after it. See [`LockHolder::this_process`].
fn describe_command(mut args: impl Iterator<Item = String>) -> String {
    let program = args.next().map_or_else(
        || "dsinfra".to_owned(),
        |p| {
            std::path::Path::new(&p)
                .file_name()
                .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
        },
    );
    match args.next() {
        Some(sub)
            if sub.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !sub.starts_with('-') =>
        {
            format!("{program} {sub}")
        }
        _ => program,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_holder_on_one_line() {
        let holder = LockHolder {
            pid: 4242,
            host: "lab1".to_owned(),
            user: "alice".to_owned(),
            command: "dsinfra apply exp.hcl".to_owned(),
            since: DateTime::parse_from_rfc3339("2026-11-22T05:30:00Z")
                .expect("valid time")
                .with_timezone(&Utc),
        };
        assert_eq!(
            holder.describe(),
            "pid 4242, user alice on host lab1, running `dsinfra apply exp.hcl` since 2026-11-22T05:30:00Z"
        );
        let me = LockHolder::current("x");
        assert_eq!(me.pid, std::process::id());
        assert!(!me.host.is_empty() && !me.user.is_empty());
    }

    #[test]
    fn the_recorded_command_never_includes_arguments_that_may_be_secret() {
        let args = [
            "/usr/local/bin/dsinfra",
            "apply",
            "exp.hcl",
            "-var",
            "key=hunter2",
        ]
        .into_iter()
        .map(str::to_owned);
        assert_eq!(describe_command(args), "dsinfra apply");
        let flag_first = ["dsinfra", "--var=key=hunter2"]
            .into_iter()
            .map(str::to_owned);
        assert_eq!(describe_command(flag_first), "dsinfra");
    }
}
