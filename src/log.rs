//! The tracing subscriber: where dsinfra's log events go, always through the redaction registry.
//!
//! This is not a CLI concern: which events are kept (the filters), the redacting writer and the
//! short terminal format are the library's logging policy; the CLI only passes `--log-file` and
//! its colour choice to [`init`].
//!
//! The library logs with `tracing` (ARM retries, lock renewals, trust-on-first-use host keys,
//! SSH waits); nothing is written unless the binary installs a subscriber, which [`init`] does
//! once per process. Three cases, chosen so that the terminal stays the renderer's:
//!
//! - Neither `DSINFRA_LOG` nor `--log-file`: warnings and errors from dsinfra itself go to stderr,
//!   one line each in the renderer's words (`warning: node gpu: no pinned host key; ...`).
//!   Libraries stay silent, and so do ARM retries (`dsinfra::azure::client`): they are routine,
//!   bounded, and a call that still fails is reported as an error with advice.
//! - `--log-file FILE`: additionally, every event that `DSINFRA_LOG` selects (default: dsinfra at
//!   debug level) is appended to FILE with a timestamp, level and target. The file is created
//!   0600, since a log describes the user's infrastructure in detail.
//! - `DSINFRA_LOG` without `--log-file`: the events it selects go to stderr in that full format,
//!   instead of the short warnings (which it includes at its own level).
//!
//! Every byte goes through [`crate::secret::RedactingWriter`], so any secret registered so far
//! (keys read with listKeys, signed SAS tokens, Azure AD tokens, customData, private keys) is
//! written as `***`, whichever library formatted the line.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Mutex;

use console::Style;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;

use crate::secret::RedactingWriter;

/// The environment variable holding the log filter, in `tracing_subscriber::EnvFilter` syntax
/// (`debug`, `dsinfra=debug,hyper=info`, `dsinfra::storage=trace`).
pub const LOG_ENV: &str = "DSINFRA_LOG";

/// What reaches the terminal when nothing else was asked for.
const TERMINAL_DEFAULT: &str = "dsinfra=warn,dsinfra::azure::client=error";

/// What a log file records when `DSINFRA_LOG` does not say.
const FILE_DEFAULT: &str = "dsinfra=debug";

/// Why logging could not be set up. The command does not run: a log the user asked for and did
/// not get would be found missing exactly when it is needed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `DSINFRA_LOG` is not a valid filter.
    #[error("{LOG_ENV}=`{value}` is not a valid log filter: {reason}")]
    Filter {
        /// The variable's value.
        value: String,
        /// What the filter parser said.
        reason: String,
    },
    /// The log file cannot be opened for appending.
    #[error("could not open the log file {path}: {source}")]
    File {
        /// The file named by `--log-file`.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Installs the process's subscriber (see the module documentation). `stderr_colour` styles the
/// terminal's short warnings like the renderer's notes. If a subscriber is already installed
/// (dsinfra run twice in one process, as in tests) the first one stays.
///
/// # Errors
///
/// `DSINFRA_LOG` is invalid, or the log file cannot be opened.
pub fn init(log_file: Option<&Path>, stderr_colour: bool) -> Result<(), LogError> {
    let requested = std::env::var(LOG_ENV).ok().filter(|v| !v.trim().is_empty());
    let filter = parse_filter;
    let file = log_file.map(open_log).transpose()?;
    // Each branch builds a differently typed subscriber, so each installs its own.
    let installed = match (file, requested) {
        (Some(file), requested) => {
            let file_filter = filter(requested.as_deref().unwrap_or(FILE_DEFAULT))?;
            let subscriber = tracing_subscriber::registry()
                .with(tracing_subscriber::Layer::with_filter(
                    terminal_layer(stderr_colour),
                    filter(TERMINAL_DEFAULT)?,
                ))
                .with(tracing_subscriber::Layer::with_filter(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(Redacted(Mutex::new(file))),
                    file_filter,
                ));
            tracing::subscriber::set_global_default(subscriber)
        }
        (None, Some(requested)) => {
            let subscriber =
                tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(stderr_colour)
                        .with_writer(Redacted(std::io::stderr)),
                    filter(&requested)?,
                ));
            tracing::subscriber::set_global_default(subscriber)
        }
        (None, None) => {
            let subscriber =
                tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(
                    terminal_layer(stderr_colour),
                    filter(TERMINAL_DEFAULT)?,
                ));
            tracing::subscriber::set_global_default(subscriber)
        }
    };
    // Already installed: the first subscriber of the process stays, as documented.
    drop(installed);
    Ok(())
}

/// The filter `text` describes, in `EnvFilter` syntax.
fn parse_filter(text: &str) -> Result<EnvFilter, LogError> {
    EnvFilter::try_new(text).map_err(|e| LogError::Filter {
        value: text.to_owned(),
        reason: e.to_string(),
    })
}

/// Opens `path` for appending, created with mode 0600 where the platform has modes.
fn open_log(path: &Path) -> Result<File, LogError> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path).map_err(|source| LogError::File {
        path: path.display().to_string(),
        source,
    })
}

/// Makes the terminal's writer: stderr.
type StderrWriter = fn() -> std::io::Stderr;

/// The terminal's layer type: short lines, default field formatting, redacted stderr.
type TerminalLayer<S> = tracing_subscriber::fmt::Layer<
    S,
    tracing_subscriber::fmt::format::DefaultFields,
    Short,
    Redacted<StderrWriter>,
>;

/// The terminal's layer: short lines on stderr, redacted.
fn terminal_layer<S>(colour: bool) -> TerminalLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_ansi(colour)
        .event_format(Short { colour })
        .with_writer(Redacted(std::io::stderr as StderrWriter))
}

/// Makes a [`RedactingWriter`] around each writer the inner `MakeWriter` makes. The fmt layer
/// formats an event into one buffer and writes it in one call, so a secret is never split
/// between two writes (where redaction could not see it whole).
struct Redacted<M>(M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Redacted<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter::new(self.0.make_writer())
    }
}

/// One line per event in the renderer's style: `warning: message key=value`.
struct Short {
    colour: bool,
}

impl Short {
    /// The label and its style for a level (only warnings and errors reach this by default;
    /// a `DSINFRA_LOG` filter goes to the full format instead).
    fn label(level: Level) -> (&'static str, Style) {
        match level {
            Level::ERROR => ("error", Style::new().red().bold()),
            Level::WARN => ("warning", Style::new().yellow().bold()),
            Level::INFO => ("note", Style::new().cyan().bold()),
            Level::DEBUG | Level::TRACE => ("debug", Style::new().dim()),
        }
    }
}

impl<S, N> FormatEvent<S, N> for Short
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let (label, style) = Self::label(*event.metadata().level());
        if self.colour {
            write!(writer, "{}: ", style.force_styling(true).apply_to(label))?;
        } else {
            write!(writer, "{label}: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `MakeWriter` that appends to a shared buffer, to see what a layer wrote.
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .expect("the buffer lock is never poisoned")
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("the buffer lock is never poisoned"))
                .into_owned()
        }
    }

    #[test]
    fn short_lines_are_redacted_and_in_the_renderers_words() {
        crate::secret::register("short-layer-secret-0001");
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .event_format(Short { colour: false })
                .with_writer(Redacted(move || writer.clone())),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(node = "gpu", "key short-layer-secret-0001 was refused");
            tracing::error!("gave up");
        });
        assert_eq!(
            buffer.text(),
            "warning: key *** was refused node=\"gpu\"\nerror: gave up\n"
        );
    }

    #[test]
    fn the_default_terminal_filter_keeps_dsinfra_warnings_only() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber =
            tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .event_format(Short { colour: false })
                    .with_writer(Redacted(move || writer.clone())),
                parse_filter(TERMINAL_DEFAULT).expect("the default filter is valid"),
            ));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "dsinfra::storage::lock", "lock renewal failed");
            tracing::info!(target: "dsinfra::engine", "informational");
            tracing::warn!(target: "dsinfra::azure::client", "retrying ARM request");
            tracing::warn!(target: "hyper::client", "a library's warning");
        });
        assert_eq!(buffer.text(), "warning: lock renewal failed\n");
    }

    #[test]
    fn the_log_file_is_created_private_and_appended_to() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("run.log");
        std::fs::write(&path, "earlier run\n").expect("the file can be written");
        let mut file = open_log(&path).expect("the log opens");
        std::io::Write::write_all(&mut file, b"this run\n").expect("the log is writable");
        assert_eq!(
            std::fs::read_to_string(&path).expect("the log is readable"),
            "earlier run\nthis run\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let fresh = dir.path().join("fresh.log");
            open_log(&fresh).expect("the log opens");
            let mode = std::fs::metadata(&fresh)
                .expect("it exists")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let err = open_log(&dir.path().join("missing/dir/run.log")).expect_err("no such dir");
        assert!(
            err.to_string().starts_with("could not open the log file "),
            "{err}"
        );
    }

    #[test]
    fn an_invalid_filter_is_refused_with_its_value() {
        let text = parse_filter("dsinfra=loud")
            .expect_err("`loud` is not a level")
            .to_string();
        assert!(
            text.starts_with("DSINFRA_LOG=`dsinfra=loud` is not a valid log filter: "),
            "{text}"
        );
    }
}
