//! Where command output goes: stdout for results (plans, DOT, JSON), stderr for diagnostics,
//! notes and errors, so `dsinfra plan --json > plan.json` and `dsinfra graph | dot` stay clean.
//! Colour is decided once, here, from `--color`, NO_COLOR and whether the stream is a terminal.

use std::io::Write as _;

use console::{Style, Term};

use super::ColorChoice;
use crate::render::error_text;

/// The terminal, as the commands see it.
#[derive(Debug, Clone)]
pub struct Output {
    stdout_colour: bool,
    stderr_colour: bool,
}

impl Output {
    /// Decide colour for both streams.
    pub fn new(choice: ColorChoice) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let decide = |term: &Term| match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => !no_color && term.features().colors_supported() && term.is_term(),
        };
        let stdout_colour = decide(&Term::stdout());
        let stderr_colour = decide(&Term::stderr());
        // console styles consult a global switch; keep it in line with our decision so that
        // renderers that use `Style` directly agree with `--color`.
        console::set_colors_enabled(stdout_colour);
        console::set_colors_enabled_stderr(stderr_colour);
        Self {
            stdout_colour,
            stderr_colour,
        }
    }

    /// Whether results on stdout may be coloured.
    pub fn stdout_colour(&self) -> bool {
        self.stdout_colour
    }

    /// Whether messages on stderr may be coloured.
    pub fn stderr_colour(&self) -> bool {
        self.stderr_colour
    }

    /// Write a result to stdout as-is.
    // A method although it needs no field: commands write through the one `Output` they are
    // given, so where output goes stays one decision.
    #[allow(clippy::unused_self)]
    pub fn result(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// Write diagnostics or other pre-rendered messages to stderr as-is.
    #[allow(clippy::unused_self)]
    pub fn message(&self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }

    /// A one-line note on stderr (`note: ...`).
    pub fn note(&self, text: &str) {
        let label = self.paint_stderr(Style::new().cyan().bold(), "note");
        self.message(&format!("{label}: {text}\n"));
    }

    /// Print an error and its causes to stderr: the one place errors are printed, each message
    /// of the chain with every registered secret redacted (`secret::redact_chain`).
    pub fn error(&self, err: &anyhow::Error) {
        let label = self.paint_stderr(Style::new().red().bold(), "error");
        self.message(&error_text(
            &label,
            &crate::secret::redact_chain(err.chain()),
        ));
    }

    fn paint_stderr(&self, style: Style, text: &str) -> String {
        if self.stderr_colour {
            style.force_styling(true).apply_to(text).to_string()
        } else {
            text.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::render::error_text;

    #[test]
    fn printed_errors_are_redacted_and_keep_their_chain() {
        crate::secret::register("printed-error-secret-0001");
        let err = anyhow::anyhow!("the service said: key printed-error-secret-0001 is wrong")
            .context("listKeys failed")
            .context("could not sign sas.read");
        assert_eq!(
            error_text("error", &crate::secret::redact_chain(err.chain())),
            "error: could not sign sas.read\n  caused by: listKeys failed\n  caused by: the \
             service said: key *** is wrong\n"
        );
    }
}
