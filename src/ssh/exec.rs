//! Running commands on a session: exec with stdin, line-by-line output, exit status, timeout;
//! plus the few fixed commands built on it (scripts, uploads, the boot id).

use std::time::Duration;

use russh::client;
use russh::{ChannelMsg, ChannelReadHalf, ChannelWriteHalf};

use super::error::{Error, ErrorKind};
use super::script::{self, Privilege, ScriptRequest, shell_quote};
use super::session::Session;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// How a remote command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(u32),
    /// It was killed by this signal (`KILL`, `TERM`, ...).
    Signal(String),
}

impl Exit {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        *self == Self::Code(0)
    }
}

/// The collected output of a short command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// How it ended.
    pub exit: Exit,
    /// Standard output, lines joined with `\n`.
    pub stdout: String,
    /// Standard error, lines joined with `\n`.
    pub stderr: String,
}

/// Where streamed lines go: `(stream, line)` without the trailing newline.
pub type LineSink<'a> = &'a mut (dyn FnMut(Stream, &str) + Send);

/// Splits a byte stream into lines as chunks arrive (a line may span packets).
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    /// Adds a chunk and emits every completed line.
    pub(crate) fn push(&mut self, chunk: &[u8], mut emit: impl FnMut(&str)) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + pos;
            emit(&line_text(&self.pending[start..end]));
            start = end + 1;
        }
        self.pending.drain(..start);
    }

    /// Emits what is left after the stream ended without a final newline.
    pub(crate) fn finish(&mut self, mut emit: impl FnMut(&str)) {
        if !self.pending.is_empty() {
            emit(&line_text(&self.pending));
            self.pending.clear();
        }
    }
}

/// A line as text: invalid UTF-8 is replaced, a trailing `\r` dropped.
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

impl Session {
    /// Runs `command` (the remote argv: keep secrets out of it), writes `stdin` to it, streams
    /// its output line by line to `on_line`, and returns how it ended. After `timeout` the
    /// command is sent SIGKILL and the call fails with a timeout error.
    pub async fn exec(
        &self,
        command: &str,
        stdin: &[u8],
        timeout: Option<Duration>,
        on_line: LineSink<'_>,
    ) -> Result<Exit, Error> {
        let (mut reader, writer) = self.open_exec(command).await?;
        self.drive(&mut reader, &writer, command, stdin, timeout, on_line)
            .await
    }

    /// Opens a channel and starts `command` on it.
    pub(crate) async fn open_exec(
        &self,
        command: &str,
    ) -> Result<(ChannelReadHalf, ChannelWriteHalf<client::Msg>), Error> {
        let channel = self
            .handle()
            .channel_open_session()
            .await
            .map_err(|e| self.lost_or_protocol(&e))?;
        let (reader, writer) = channel.split();
        writer
            .exec(true, command)
            .await
            .map_err(|e| self.lost_or_protocol(&e))?;
        Ok((reader, writer))
    }

    /// Writes `stdin` to a started command (then end of input), streams its output line by
    /// line to `on_line` until the channel closes, and returns how it ended. After `timeout`
    /// the command is sent SIGKILL and the call fails with a timeout error. `command` is for
    /// messages only.
    pub(crate) async fn drive(
        &self,
        reader: &mut ChannelReadHalf,
        writer: &ChannelWriteHalf<client::Msg>,
        command: &str,
        stdin: &[u8],
        timeout: Option<Duration>,
        on_line: LineSink<'_>,
    ) -> Result<Exit, Error> {
        // Writing and reading run together: a command may print before it has read all its
        // input, and neither side may wait for the other's window.
        let write = async {
            let sent = writer.data(stdin).await;
            let _ = writer.eof().await;
            sent
        };
        let read = async {
            let mut out = LineBuffer::default();
            let mut err = LineBuffer::default();
            let mut exit = None;
            let mut refused = false;
            while let Some(message) = reader.wait().await {
                match message {
                    ChannelMsg::Data { data } => {
                        out.push(&data, |line| on_line(Stream::Stdout, line));
                    }
                    ChannelMsg::ExtendedData { data, ext: 1 } => {
                        err.push(&data, |line| on_line(Stream::Stderr, line));
                    }
                    ChannelMsg::ExitStatus { exit_status } => exit = Some(Exit::Code(exit_status)),
                    ChannelMsg::ExitSignal { signal_name, .. } => {
                        exit = Some(Exit::Signal(format!("{signal_name:?}")));
                    }
                    ChannelMsg::Failure => refused = true,
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            out.finish(|line| on_line(Stream::Stdout, line));
            err.finish(|line| on_line(Stream::Stderr, line));
            (exit, refused)
        };

        let both = async { tokio::join!(write, read) };
        let ((_, (exit, refused)), timed_out) = match timeout {
            Some(limit) => match tokio::time::timeout(limit, both).await {
                Ok(done) => (done, None),
                Err(_) => ((Ok(()), (None, false)), Some(limit)),
            },
            None => (both.await, None),
        };
        if let Some(after) = timed_out {
            // Best effort: OpenSSH delivers the signal to the command; closing the channel
            // then hangs up on whatever ignored it.
            let _ = writer.signal(russh::Sig::KILL).await;
            let _ = writer.close().await;
            return Err(self.error(ErrorKind::Timeout {
                what: "remote command".to_owned(),
                after,
            }));
        }
        if refused {
            return Err(self.error(ErrorKind::Protocol(format!(
                "the server refused to run {command:?}"
            ))));
        }
        exit.ok_or_else(|| {
            self.error(ErrorKind::ConnectionLost(
                "the command ended without an exit status".to_owned(),
            ))
        })
    }

    /// Runs a short command and collects its output.
    pub async fn output(
        &self,
        command: &str,
        stdin: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Output, Error> {
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let exit = self
            .exec(command, stdin, timeout, &mut |stream, line| match stream {
                Stream::Stdout => stdout.push(line.to_owned()),
                Stream::Stderr => stderr.push(line.to_owned()),
            })
            .await?;
        Ok(Output {
            exit,
            stdout: stdout.join("\n"),
            stderr: stderr.join("\n"),
        })
    }

    /// Runs a script through the stdin wrapper (see [`super::script`]): the only remote argv is
    /// `sudo -n bash -s` or `bash -s`. A script stopped by its timeout is a timeout error.
    pub async fn run_script(
        &self,
        request: &ScriptRequest,
        on_line: LineSink<'_>,
    ) -> Result<Exit, Error> {
        let (wrapper, channel_limit) = self.wrap(request)?;
        let result = self
            .exec(
                request.privilege.shell(),
                wrapper.as_bytes(),
                channel_limit,
                on_line,
            )
            .await;
        self.script_exit(request, result)
    }

    /// The stdin wrapper for `request` (see [`super::script`]) and how long the channel waits
    /// for it: the script's limit is enforced on the node (see `script::render`); the channel
    /// only gives up later, for a node that stopped answering altogether.
    pub(crate) fn wrap(
        &self,
        request: &ScriptRequest,
    ) -> Result<(String, Option<Duration>), Error> {
        let token = format!("{:016x}", rand::random::<u64>());
        let wrapper =
            script::render(request, &token).map_err(|why| self.error(ErrorKind::Protocol(why)))?;
        Ok((wrapper, request.timeout.map(|t| t + script::CHANNEL_GRACE)))
    }

    /// How a wrapped script ended: a channel timeout or the script's own limit is a timeout
    /// error about the script.
    pub(crate) fn script_exit(
        &self,
        request: &ScriptRequest,
        result: Result<Exit, Error>,
    ) -> Result<Exit, Error> {
        let exit = result.map_err(|e| match e.kind_timeout() {
            Some(after) => self.error(ErrorKind::Timeout {
                what: "script".to_owned(),
                after,
            }),
            None => e,
        })?;
        match (exit, request.timeout) {
            (Exit::Code(script::TIMEOUT_EXIT), Some(after)) => {
                Err(self.error(ErrorKind::Timeout {
                    what: "script".to_owned(),
                    after,
                }))
            }
            (exit, _) => Ok(exit),
        }
    }

    /// Writes `contents` to `path` on the node (atomically: a temp file, then rename) with the
    /// given mode, as `privilege`. The bytes travel on stdin, so they may be secret.
    pub async fn upload(
        &self,
        path: &str,
        contents: &[u8],
        mode: u32,
        privilege: Privilege,
    ) -> Result<(), Error> {
        let sudo = match privilege {
            Privilege::Sudo => "sudo -n ",
            Privilege::User => "",
        };
        let command = format!(
            "{sudo}sh -c 'umask 077 && cat > \"$1.dsinfra-tmp\" && chmod {mode:o} \"$1.dsinfra-tmp\" \
             && mv -f \"$1.dsinfra-tmp\" \"$1\"' dsinfra-upload {}",
            shell_quote(path)
        );
        let output = self.output(&command, contents, None).await?;
        if output.exit.success() {
            Ok(())
        } else {
            Err(self.error(ErrorKind::Protocol(format!(
                "upload to {path} failed ({:?}): {}",
                output.exit, output.stderr
            ))))
        }
    }

    /// The node's boot id; `path` overrides `/proc/sys/kernel/random/boot_id` (tests use a file
    /// they can change to simulate a reboot).
    pub async fn boot_id(&self, path: Option<&str>) -> Result<String, Error> {
        let path = path.unwrap_or(BOOT_ID_PATH);
        let output = self
            .output(
                &format!("cat -- {}", shell_quote(path)),
                b"",
                Some(Duration::from_secs(30)),
            )
            .await?;
        let id = output.stdout.trim();
        if output.exit.success() && !id.is_empty() {
            Ok(id.to_owned())
        } else {
            Err(self.error(ErrorKind::Protocol(format!(
                "cannot read the boot id from {path}: {}",
                output.stderr
            ))))
        }
    }

    /// A russh failure while opening or using a channel: lost if the connection is gone.
    fn lost_or_protocol(&self, error: &russh::Error) -> Error {
        if self.is_closed() {
            self.error(ErrorKind::ConnectionLost(error.to_string()))
        } else {
            self.error(ErrorKind::Protocol(error.to_string()))
        }
    }
}

/// Where Linux publishes the id of the current boot.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_and_flush_at_end() {
        let mut buffer = LineBuffer::default();
        let mut lines = Vec::new();
        buffer.push(b"one\ntw", |l| lines.push(l.to_owned()));
        buffer.push(b"o\r\nthr", |l| lines.push(l.to_owned()));
        buffer.push(b"ee", |l| lines.push(l.to_owned()));
        assert_eq!(lines, ["one", "two"]);
        buffer.finish(|l| lines.push(l.to_owned()));
        assert_eq!(lines, ["one", "two", "three"]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        let mut buffer = LineBuffer::default();
        let mut lines = Vec::new();
        buffer.push(b"a\xffb\n", |l| lines.push(l.to_owned()));
        assert_eq!(lines, ["a\u{fffd}b"]);
    }
}
