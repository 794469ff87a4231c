//! The CLI's side of an operation: a [`Listener`] that draws its events on the terminal and an
//! [`Approver`] that asks there. Operations never write to the terminal themselves.
//!
//! Where things go: plans and summaries (results) on stdout; notes and diagnostics on stderr;
//! resource progress on stdout for apply/destroy and on stderr for park/unpark (their stdout is
//! the cost they leave), as live lines on a terminal and timestamped lines elsewhere; step lines
//! and block outcomes on stdout, a whole line at a time.

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;

use super::Output;
use crate::engine::op::{self, Approver, Listener, OpEvent, Question};
use crate::render;
use crate::render::progress::Progress;

/// Where resource progress is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressOn {
    /// stdout (apply, destroy).
    Stdout,
    /// stderr (park, unpark).
    Stderr,
    /// stderr, and plans and step lines too: stdout carries only the job's own output (run,
    /// whose `--recover` may start and create VMs, and run their steps, between attempts).
    Job,
}

/// Draws an operation's events.
#[derive(Debug)]
pub struct Terminal {
    out: Output,
    progress_on: ProgressOn,
    /// Plans as JSON (`plan --json`) instead of text.
    json: bool,
    /// The progress renderer of the changes in progress, between `WorkStarted` and
    /// `WorkFinished`.
    progress: Mutex<Option<Arc<Progress>>>,
}

impl Terminal {
    /// A listener drawing on `out`'s streams.
    pub fn new(out: &Output, progress_on: ProgressOn) -> Arc<Self> {
        Arc::new(Self {
            out: out.clone(),
            progress_on,
            json: false,
            progress: Mutex::new(None),
        })
    }

    /// A listener that prints plans as JSON.
    pub fn json(out: &Output) -> Arc<Self> {
        Arc::new(Self {
            out: out.clone(),
            progress_on: ProgressOn::Stdout,
            json: true,
            progress: Mutex::new(None),
        })
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Option<Arc<Progress>>> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Listener for Terminal {
    fn event(&self, event: OpEvent<'_>) {
        match event {
            OpEvent::Note(text) => self.out.note(text),
            OpEvent::Diagnostics {
                diagnostics,
                sources,
            } => self.out.message(&render::diagnostics(
                diagnostics,
                sources,
                self.out.stderr_colour(),
            )),
            OpEvent::Plan(plan) if self.json => self.out.result(&render::plan_json_string(plan)),
            OpEvent::Plan(plan) if self.progress_on == ProgressOn::Job => self
                .out
                .message(&render::plan_text(plan, self.out.stderr_colour())),
            OpEvent::Plan(plan) => self
                .out
                .result(&render::plan_text(plan, self.out.stdout_colour())),
            OpEvent::WorkStarted => {
                let progress = match self.progress_on {
                    ProgressOn::Stdout => Progress::new(console::Term::stdout().is_term()),
                    ProgressOn::Stderr | ProgressOn::Job => {
                        Progress::on_stderr(console::Term::stderr().is_term())
                    }
                };
                *self.progress() = Some(progress);
            }
            OpEvent::Resource(event) => {
                if let Some(progress) = self.progress().as_ref() {
                    progress.show(event);
                }
            }
            OpEvent::WorkFinished => {
                if let Some(progress) = self.progress().take() {
                    progress.finish();
                }
            }
            OpEvent::Step(event) if self.progress_on == ProgressOn::Job => self
                .out
                .message(&format!("{}\n", render::steps::event_line(event))),
            OpEvent::Step(event) => line(&render::steps::event_line(event)),
            // A node's stderr stays on stderr, so `dsinfra run ... > out` splits as on the node.
            OpEvent::Output {
                node,
                stream,
                line: text,
            } => {
                let text = render::run::output_line(node, text);
                match stream {
                    crate::ssh::Stream::Stdout => line(&text),
                    crate::ssh::Stream::Stderr => self.out.message(&format!("{text}\n")),
                }
            }
            OpEvent::Block {
                outcome,
                mode,
                map_hint,
            } => {
                let text = render::steps::block_outcome(outcome, mode, map_hint);
                if self.progress_on == ProgressOn::Job {
                    self.out.message(&text);
                    return;
                }
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(text.as_bytes());
                let _ = stdout.flush();
            }
        }
    }
}

/// One whole line on stdout, so lines from nodes running concurrently never interleave.
fn line(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// Asks on the terminal, or approves everything with `--auto-approve`. Never waits on a
/// terminal that is not there: without one (and without the flag) the answer is an error.
#[derive(Debug, Clone, Copy)]
pub struct Prompt {
    /// `--auto-approve`.
    pub auto_approve: bool,
}

impl Approver for Prompt {
    fn approve(&self, question: &Question) -> Result<bool, op::Error> {
        if self.auto_approve {
            return Ok(true);
        }
        if !std::io::stdin().is_terminal() || !console::Term::stderr().is_term() {
            // apply and destroy show a plan to review; park and unpark only the VMs.
            return Err(op::Error::Failed(match question.verb {
                "park" | "unpark" => {
                    "not asking for approval without a terminal: pass --auto-approve to go ahead"
                        .to_owned()
                }
                verb => format!(
                    "{verb} needs approval, but there is no terminal to ask on: review the plan above and run again with --auto-approve"
                ),
            }));
        }
        let answer = dialoguer::Confirm::new()
            .with_prompt(&question.text)
            .default(false)
            .interact()
            .context("could not read the answer");
        approval(answer)
    }
}

/// The answer to an approval prompt, with a Ctrl-C at the prompt (the terminal is in raw mode
/// there, so it arrives as a key and dialoguer reports an interrupted read) turned into
/// [`op::Interrupted`].
fn approval(answer: anyhow::Result<bool>) -> Result<bool, op::Error> {
    match answer {
        Ok(answer) => Ok(answer),
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
            }) =>
        {
            Err(op::Interrupted.into())
        }
        Err(err) => Err(op::Error::Failed(format!("{err:#}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_c_at_the_prompt_is_an_interruption_and_other_errors_keep_their_text() {
        assert!(approval(Ok(true)).expect("an answer"));
        let at_prompt = anyhow::Error::new(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "read interrupted",
        ))
        .context("could not read the answer");
        let err = approval(Err(at_prompt)).expect_err("Ctrl-C at the prompt");
        assert!(matches!(err, op::Error::Interrupted(_)));
        assert_eq!(err.to_string(), "interrupted: nothing was changed");
        let other = approval(Err(anyhow::anyhow!("no terminal"))).expect_err("kept");
        assert_eq!(other.to_string(), "no terminal");
    }
}
