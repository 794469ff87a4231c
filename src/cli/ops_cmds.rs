//! Day-two commands on an applied experiment: `park`, `unpark`, `status`, `output` and
//! `state list|show`.
//!
//! `park`, `unpark`, `status` and `output` are operations of the engine (`engine::op`): this file
//! turns their arguments into a request, connects, runs the operation with the terminal's
//! listener and prompt, and renders the outcome (park's progress goes to stderr: stdout is the
//! cost it leaves). `state` commands read the state only.

use super::request::{load, unlocking};
use super::terminal::{ProgressOn, Prompt, Terminal};
use super::{Outcome, Output};
use crate::addr::Address;
use crate::args::{OutputArgs, PowerArgs, StateCommand, StatusArgs};
use crate::engine::op::{self, Cancel, Events};
use crate::engine::power::PowerChange;
use crate::render::status as view;
use crate::state::{Backend, State};

/// The applied state ([`op::open_applied`]); only the `backend` block of the manifest is read
/// here, so no `-var` values are needed.
async fn load_state(
    manifest: &std::path::Path,
) -> anyhow::Result<(Box<dyn Backend + Send>, State)> {
    let config = crate::manifest::load_backend(manifest)?;
    Ok(op::open_applied(manifest, config.as_ref()).await?)
}

/// `dsinfra park` and `dsinfra unpark` (`engine::op::park`, whose docs say what a Ctrl-C means
/// where).
pub async fn park(
    args: &PowerArgs,
    out: &Output,
    change: PowerChange,
    cancel: Cancel,
) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let manifest = &args.manifest.manifest;
    let (backend, state) = load_state(manifest).await?;
    let options = args.connect.options();
    let conn = cancel
        .interruptible(crate::connect::connect(
            &options,
            manifest,
            &loaded.desired.azure,
        ))
        .await??;
    let request = op::ParkRequest {
        change,
        desired: &loaded.desired,
        sources: &loaded.sources,
        manifest,
        backend,
        state,
        arm: &conn,
        only: &args.only,
        steps: args.steps.options(),
    };
    let events: Events = Terminal::new(out, ProgressOn::Stderr);
    let prompt = Prompt {
        auto_approve: args.auto_approve,
    };
    let outcome = op::park(request, &events, &prompt, &cancel).await?;
    if outcome.sent.is_empty() {
        out.result(&view::cost_lines(&outcome.after));
        return Ok(Outcome::Success);
    }
    // After the progress lines, each failed VM with ARM's words and the engine's advice, as
    // apply's summary lists its failures.
    if !outcome.failures.is_empty() {
        out.message(&view::power_failures(&outcome.failures));
    }
    out.result(&view::cost_change(&outcome.before, &outcome.after));
    if let Some(note) = &outcome.interrupted {
        out.note(note);
        return Ok(Outcome::Interrupted);
    }
    match outcome.problem {
        Some(problem) => Err(problem.into()),
        None => Ok(Outcome::Success),
    }
}

/// `dsinfra status`.
pub async fn status(args: &StatusArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let manifest = &args.manifest.manifest;
    // Held (with its lock) until the status is read.
    let (backend, state) = load_state(manifest).await?;
    unlocking(
        backend,
        Box::pin(status_of(args, out, &cancel, &loaded, state)),
    )
    .await
}

/// `status` once the state is read.
async fn status_of(
    args: &StatusArgs,
    out: &Output,
    cancel: &Cancel,
    loaded: &crate::manifest::Loaded,
    state: State,
) -> anyhow::Result<Outcome> {
    let manifest = &args.manifest.manifest;
    let conn = cancel
        .interruptible(crate::connect::live_connection(
            &args.connect.options(),
            manifest,
            &loaded.desired.azure,
        ))
        .await??;
    let request = op::StatusRequest {
        state,
        arm: conn.as_deref(),
    };
    let found = op::status(request, cancel).await?;
    let idle = cancel
        .interruptible(op::idle_statuses(
            &loaded.desired,
            &found.state,
            conn.as_deref(),
        ))
        .await?;
    let colour = out.stdout_colour();
    out.result(&crate::render::status_idle::status_view(
        &found, &idle, colour,
    ));
    if let Some(note) = found.refreshed.as_ref().and_then(view::drift_note) {
        out.note(&note);
    }
    for eviction in &found.evictions {
        out.note(eviction);
    }
    Ok(Outcome::Success)
}

/// `dsinfra output`.
pub async fn output(args: &OutputArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let manifest = &args.manifest.manifest;
    let desired = &loaded.desired;
    // Held (with its lock) until the outputs are read.
    let mut backend = crate::state::open_backend(
        manifest,
        loaded.backend.as_ref(),
        &format!("dsinfra output {}", manifest.display()),
    )
    .await?;
    let state = backend.load().await;
    unlocking(backend, async {
        let state = state?.unwrap_or_else(|| State::new(&desired.experiment));
        let mut request = op::OutputRequest {
            desired,
            state,
            arm: None,
            name: args.name.as_deref(),
            show_secrets: args.show_secrets,
        };
        // Connecting (or looking for a subscription) only when ARM has something to add.
        let conn = if op::output::needs_connection(&request) {
            let options = args.connect.options();
            let live = crate::connect::live_connection(&options, manifest, &desired.azure);
            cancel.interruptible(live).await??
        } else {
            None
        };
        request.arm = conn.as_deref();
        let shown = op::output(request, &cancel).await?;
        // A named output comes back alone, and shown (a hidden one is refused).
        let named = args.name.as_ref().and(shown.values.first());
        match named.and_then(|one| one.value.as_ref()) {
            Some(value) if args.json => out.result(&format!("{value}\n")),
            Some(value) => out.result(&view::output_raw(value)),
            None if args.json => out.result(&view::outputs_json(&shown.values)),
            None => out.result(&view::outputs_text(&shown.values)),
        }
        let unknown = shown.unknown();
        if unknown > 0 {
            out.note(&format!(
                "{unknown} output(s) hold values only Azure knows: apply first, or pass --emulator/--endpoint to read them"
            ));
        }
        Ok(Outcome::Success)
    })
    .await
}

/// `dsinfra state list|show`.
pub async fn state(command: &StateCommand, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        StateCommand::List(args) => {
            let (backend, state) = load_state(&args.manifest).await?;
            backend.unlock().await?;
            out.result(&view::state_list(&state));
        }
        StateCommand::Show(args) => {
            let (backend, state) = load_state(&args.manifest).await?;
            backend.unlock().await?;
            let address: Address = args.address.parse()?;
            let Some(resource) = state.resource(&address) else {
                let all: Vec<String> = state
                    .resources
                    .iter()
                    .map(|r| r.address.to_string())
                    .collect();
                let hint = crate::diag::did_you_mean(&args.address, all.iter().map(String::as_str))
                    .map_or_else(
                        || "`dsinfra state list` shows every address".to_owned(),
                        |m| format!("did you mean `{m}`?"),
                    );
                anyhow::bail!("the state has no resource at {address}: {hint}");
            };
            out.result(&view::state_show(resource));
        }
    }
    Ok(Outcome::Success)
}
