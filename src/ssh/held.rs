//! A quick command whose shell is then held open for a script that may follow on the same
//! channel.
//!
//! The step runner first reads a node's boot id and step markers, then usually runs a script.
//! As two commands that is two channels, and on the node two shells from sshd: at 32 nodes on
//! two shared cores, that second process per node was the runner's gap to OpenSSH's one
//! `cat >f && bash f` (docs/benchmarks.md). Held, the login shell answers the quick command,
//! prints a sentinel line, and waits for one line on stdin: a privilege word makes it `exec`
//! the script shell ([`Privilege::shell`]) on the rest of stdin (the same wrapper as
//! [`Session::run_script`]), anything else (or end of input) makes it exit. `read` takes one
//! byte at a time from a pipe or socket (POSIX requires it not to read past the newline), so the
//! wrapper after the line reaches the script shell whole. Nothing secret is in the remote argv:
//! the command, the sentinel and the two fixed shells.

use std::time::Duration;

use russh::client;
use russh::{ChannelMsg, ChannelReadHalf, ChannelWriteHalf};

use super::error::{Error, ErrorKind};
use super::exec::{Exit, LineBuffer, LineSink, Output};
use super::script::{Privilege, ScriptRequest};
use super::session::Session;

/// The line the held shell prints after the quick command, followed by its exit status.
const SENTINEL: &str = "DSINFRA_HELD";

/// A node's shell waiting, after its quick command, for a script or a release.
pub struct Held {
    session: Session,
    reader: ChannelReadHalf,
    writer: ChannelWriteHalf<client::Msg>,
}

/// The word that selects `privilege`'s shell on the held shell's stdin.
fn word(privilege: Privilege) -> &'static str {
    match privilege {
        Privilege::Sudo => "sudo",
        Privilege::User => "user",
    }
}

/// The remote command: `command` in the login shell (POSIX `sh`), the sentinel with its
/// status, then the wait for the privilege word.
fn held_command(command: &str) -> String {
    let arm = |p: Privilege| format!("{}) exec {} ;;", word(p), p.shell());
    format!(
        "{command}\nprintf '\\n{SENTINEL} %s\\n' \"$?\"; IFS= read -r go || exit 0; \
         case \"$go\" in {} {} esac; exit 0",
        arm(Privilege::Sudo),
        arm(Privilege::User),
    )
}

/// The quick command's output from the lines before the sentinel, or `None` while the
/// sentinel has not arrived. The sentinel is printed after a newline so that it starts a line
/// even when the command's output did not end with one: that empty line is not output.
fn parse_prelude(stdout: &mut Vec<String>) -> Option<u32> {
    let status = stdout.last()?.strip_prefix(SENTINEL)?.trim().parse().ok()?;
    stdout.pop();
    if stdout.last().is_some_and(String::is_empty) {
        stdout.pop();
    }
    Some(status)
}

impl Session {
    /// Runs the quick `command` (the remote argv: keep secrets out of it) and collects its
    /// output, keeping its shell open for [`Held::run_script`] or [`Held::release`]. After
    /// `timeout` without the answer the channel is closed and the call fails with a timeout.
    pub async fn hold(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<(Output, Held), Error> {
        let (mut reader, writer) = self.open_exec(&held_command(command)).await?;
        let read = async {
            let (mut out, mut err) = (LineBuffer::default(), LineBuffer::default());
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            while let Some(message) = reader.wait().await {
                match message {
                    ChannelMsg::Data { data } => {
                        out.push(&data, |line| stdout.push(line.to_owned()));
                        if let Some(status) = parse_prelude(&mut stdout) {
                            return Ok((status, stdout, stderr));
                        }
                    }
                    ChannelMsg::ExtendedData { data, ext: 1 } => {
                        err.push(&data, |line| stderr.push(line.to_owned()));
                    }
                    ChannelMsg::Failure => {
                        return Err(ErrorKind::Protocol(format!(
                            "the server refused to run {command:?}"
                        )));
                    }
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            err.finish(|line| stderr.push(line.to_owned()));
            Err(ErrorKind::ConnectionLost(format!(
                "the shell ended before answering {command:?}: {}",
                stderr.join("\n")
            )))
        };
        let answer = match timeout {
            Some(limit) => {
                tokio::time::timeout(limit, read)
                    .await
                    .unwrap_or(Err(ErrorKind::Timeout {
                        what: "remote command".to_owned(),
                        after: limit,
                    }))
            }
            None => read.await,
        };
        match answer {
            Ok((status, stdout, stderr)) => {
                let output = Output {
                    exit: Exit::Code(status),
                    stdout: stdout.join("\n"),
                    stderr: stderr.join("\n"),
                };
                let held = Held {
                    session: self.clone(),
                    reader,
                    writer,
                };
                Ok((output, held))
            }
            Err(kind) => {
                let _ = writer.close().await;
                Err(self.error(kind))
            }
        }
    }
}

impl Held {
    /// Runs a script through the held shell, exactly as [`Session::run_script`] would on a new
    /// channel.
    pub async fn run_script(
        mut self,
        request: &ScriptRequest,
        on_line: LineSink<'_>,
    ) -> Result<Exit, Error> {
        let (wrapper, channel_limit) = self.session.wrap(request)?;
        let stdin = format!("{}\n{wrapper}", word(request.privilege));
        let result = self
            .session
            .drive(
                &mut self.reader,
                &self.writer,
                request.privilege.shell(),
                stdin.as_bytes(),
                channel_limit,
                on_line,
            )
            .await;
        self.session.script_exit(request, result)
    }

    /// Lets the held shell exit without running anything.
    pub async fn release(self) {
        let _ = self.writer.data(&b"release\n"[..]).await;
        let _ = self.writer.eof().await;
        let _ = self.writer.close().await;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::*;

    /// Runs the held command in `shell` with `stdin`, as sshd would in the login shell.
    fn run_in(shell: &str, command: &str, stdin: &str) -> String {
        let mut child = Command::new(shell)
            .args(["-c", &held_command(command)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the shell starts");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("stdin written");
        let out = child.wait_with_output().expect("the shell ends");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    #[test]
    fn the_held_shell_hands_the_rest_of_stdin_to_the_script_shell_or_exits() {
        for shell in ["sh", "bash"] {
            let ran = run_in(
                shell,
                "echo state",
                "user\necho \"ran $((1 + 1))\"\necho end\n",
            );
            assert_eq!(ran, "state\n\nDSINFRA_HELD 0\nran 2\nend\n", "{shell}");
            let released = run_in(shell, "printf partial; false", "release\necho never\n");
            assert_eq!(released, "partial\nDSINFRA_HELD 1\n", "{shell}");
            let closed = run_in(shell, "true", "");
            assert_eq!(closed, "\nDSINFRA_HELD 0\n", "{shell}");
        }
    }

    #[test]
    fn the_prelude_is_the_output_before_the_sentinel() {
        let mut lines = vec!["a".to_owned(), String::new(), "DSINFRA_HELD 3".to_owned()];
        assert_eq!(parse_prelude(&mut lines), Some(3));
        assert_eq!(lines, ["a"]);
        let mut partial = vec!["partial".to_owned(), "DSINFRA_HELD 0".to_owned()];
        assert_eq!(parse_prelude(&mut partial), Some(0));
        assert_eq!(partial, ["partial"]);
        let mut waiting = vec!["a".to_owned()];
        assert_eq!(parse_prelude(&mut waiting), None);
        assert_eq!(waiting, ["a"]);
    }
}
