//! Day-two commands on an applied experiment: `park`, `unpark`, `status`, `output` and
//! `state list|show`.
//!
//! `park`/`unpark` refresh the VMs' power states first (so a VM parked by its auto-shutdown
//! schedule is not parked again), ask for approval, run the power actions in parallel and save the
//! state after each VM. Every ARM request goes through the connection's limiter
//! (`--parallelism`), and progress is the engine's events drawn by apply's renderer (on stderr:
//! stdout is the cost the command leaves). `status` and `output` read live values when a connection is available and
//! fall back to what the state recorded; they never save. `state` commands read the state only.

use std::fmt::Write as _;

use anyhow::Context as _;
use chrono::Utc;

use super::args::{OutputArgs, PowerArgs, StateCommand, StatusArgs};
use super::interrupt;
use super::plan_cmd::{live_connection, target_name};
use super::request::load;
use super::steps_run::StepsJob;
use super::{AlreadyReported, Outcome, Output};
use crate::addr::Address;
use crate::engine::events::Operation;
use crate::engine::power::{self, PowerChange, PowerError};
use crate::engine::refresh::{self, RefreshReport, has_unknown, resolve_known};
use crate::engine::{advice, preflight};
use crate::render::status as view;
use crate::state::{Backend, State};

/// The temp-disk warning every park shows before asking.
const TEMP_DISK_WARNING: &str = "parking deallocates the VMs: compute is no longer billed, but each VM's temp disk (/mnt) is wiped, including BeeOND scratch and blobfuse caches; OS and data disks, public IPs and storage are kept (and still billed)";

/// Open the manifest's state (local, or the `backend` block's blob) and read it; only the
/// `backend` block of the manifest is read here, so no `-var` values are needed.
fn load_state(manifest: &std::path::Path) -> anyhow::Result<(Box<dyn Backend + Send>, State)> {
    let config = crate::manifest::load_backend(manifest)?;
    let mut backend = crate::state::open_backend(
        manifest,
        config.as_ref(),
        &format!("dsinfra {}", manifest.display()),
    )?;
    let state = backend.load()?.with_context(|| {
        format!(
            "{} has no state yet: nothing was applied (run `dsinfra apply {}` first)",
            manifest.display(),
            manifest.display()
        )
    })?;
    Ok((backend, state))
}

/// `dsinfra park` and `dsinfra unpark`.
///
/// Ctrl-C until the power actions are sent (connecting, refreshing, the start preflight, the
/// question, BeeOND's stop before a park) ends the command with nothing changed, its lock
/// released at once (see `interrupt`). Once sent, the actions run in Azure whatever dsinfra
/// does, so a Ctrl-C there only stops the waiting: what finished is saved, and the next refresh
/// reads the rest.
pub fn park(args: &PowerArgs, out: &Output, change: PowerChange) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let (mut backend, mut state) = load_state(&args.manifest.manifest)?;
    let rt = interrupt::runtime()?;
    let conn = interrupt::block_on(
        &rt,
        crate::connect::connect(
            &args.connect.options(),
            &args.manifest.manifest,
            &loaded.desired.azure,
        ),
    )??;
    interrupt::block_on(
        &rt,
        refresh::refresh(&conn.client, &conn.subscription, &mut state),
    )??;
    let selected = power::select_vms(&state, &args.only)?;
    let todo = power::needing_change(&state, &selected, change);
    let verb = match change {
        PowerChange::Park => "parked",
        PowerChange::Unpark => "running",
    };
    if todo.is_empty() {
        out.note(&format!(
            "nothing to do: {} VM(s) selected, all already {verb}",
            selected.len()
        ));
        out.result(&view::cost_lines(&power::hourly_cost(&state)));
        return Ok(Outcome::Success);
    }
    if change == PowerChange::Park {
        out.note(TEMP_DISK_WARNING);
    }
    let question = power_question(change, &todo, &conn.target);
    if change == PowerChange::Unpark {
        check_start(&rt, &conn, &state, &todo, &loaded, out)?;
    }
    interrupt::approval(approve(&question, args.auto_approve).map(|()| true))?;
    let steps = StepsJob::new(&conn, &args.manifest.manifest, &args.steps, change.verb());
    if change == PowerChange::Park {
        (backend, state) = interrupt::block_on(
            &rt,
            steps.before_park(&loaded.desired, (backend, state), &todo, out),
        )?;
    }
    // The last moment at which a Ctrl-C means "nothing was changed".
    interrupt::check()?;
    let before = power::hourly_cost(&state);
    let progress = crate::render::progress::Progress::on_stderr(console::Term::stderr().is_term());
    // Against an emulator, the client waits at the emulator's latency scale, as apply's does;
    // either way it is gated by the connection's limiter.
    let client = conn.engine_client.clone();
    let result = interrupt::block_on(
        &rt,
        power::set_power(
            &client,
            backend.as_mut(),
            &mut state,
            &todo,
            change,
            &progress.sink(),
        ),
    );
    progress.finish();
    if let Ok(Err(PowerError::Failed { failures, .. })) = &result {
        report_failures(failures, change, &loaded, out);
    }
    let after = power::hourly_cost(&state);
    out.result(&view::cost_change(&before, &after));
    let Ok(result) = result else {
        out.note(&format!(
            "interrupted: the {} power action(s) sent go on in Azure; what finished is saved, \
             and `dsinfra status {}` shows the rest",
            todo.len(),
            args.manifest.manifest.display()
        ));
        return Ok(Outcome::Interrupted);
    };
    let steps_result = match change {
        PowerChange::Unpark => {
            let Ok(ran) = interrupt::block_on(
                &rt,
                steps.after_unpark(&loaded.desired, (backend, state), &todo, out),
            ) else {
                out.note(
                    "interrupted: the VMs are running; the steps that had not finished run at \
                     the next `dsinfra apply`",
                );
                return Ok(Outcome::Interrupted);
            };
            ran
        }
        PowerChange::Park => Ok(()),
    };
    result?;
    steps_result?;
    Ok(Outcome::Success)
}

/// `Deallocate 2 VM(s) on <target>: vm.a.vm, vm.b.vm?`
fn power_question(
    change: PowerChange,
    todo: &[Address],
    target: &crate::engine::op::Target,
) -> String {
    let names: Vec<String> = todo.iter().map(ToString::to_string).collect();
    format!(
        "{} {} VM(s) on {}: {}?",
        match change {
            PowerChange::Park => "Deallocate",
            PowerChange::Unpark => "Start",
        },
        todo.len(),
        target_name(target),
        names.join(", ")
    )
}

/// Before an unpark: starting needs the vCPUs a deallocated VM gave back, so the quota is
/// checked before any VM is started; a shortfall is a located diagnostic, printed here.
fn check_start(
    rt: &tokio::runtime::Runtime,
    conn: &crate::connect::Connection,
    state: &State,
    todo: &[Address],
    loaded: &crate::manifest::Loaded,
    out: &Output,
) -> anyhow::Result<()> {
    let locations = preflight::locations_of_vms(state, todo);
    let capacity = interrupt::block_on(
        rt,
        preflight::Capacity::fetch(&conn.client, &conn.subscription, &locations),
    )??;
    let problems = preflight::check_start(state, todo, &loaded.desired, &capacity);
    if problems.is_empty() {
        return Ok(());
    }
    out.message(&crate::render::diagnostics(
        &problems,
        &loaded.sources,
        out.stderr_colour(),
    ));
    Err(AlreadyReported {
        count: problems.len(),
    }
    .into())
}

/// After the progress lines, each failed VM with ARM's words and the engine's advice, as
/// apply's summary lists its failures.
fn report_failures(
    failures: &[(Address, crate::azure::ArmError)],
    change: PowerChange,
    loaded: &crate::manifest::Loaded,
    out: &Output,
) {
    for (a, err) in failures {
        // The engine's advice (quota numbers, capacity: another zone, region or size) applies
        // to a start as it does to a create.
        let described = advice::describe(
            err,
            a,
            Operation::Update,
            loaded.desired.resource(a),
            Some(&loaded.sources),
        );
        let mut text = format!(
            "{a}: {} failed: {}\n",
            change.operation().progressive(),
            described.message
        );
        for help in &described.advice {
            let _ = writeln!(text, "  = help: {help}");
        }
        out.message(&text);
    }
}

/// Ask before changing anything; `--auto-approve` skips the question, and without a terminal
/// and without the flag this is an error, never a hang.
fn approve(question: &str, auto_approve: bool) -> anyhow::Result<()> {
    if auto_approve {
        return Ok(());
    }
    if !console::Term::stderr().is_term() {
        anyhow::bail!(
            "not asking for approval without a terminal: pass --auto-approve to go ahead"
        );
    }
    let yes = dialoguer::Confirm::new()
        .with_prompt(question)
        .default(false)
        .interact()
        .context("could not read the answer")?;
    if !yes {
        anyhow::bail!("cancelled: nothing was changed");
    }
    Ok(())
}

/// `dsinfra status`.
pub fn status(args: &StatusArgs, out: &Output) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    // The state's lock is held while ARM is read: a Ctrl-C meanwhile must release it (a remote
    // lease would otherwise refuse everyone for up to a minute), so the reads are interruptible.
    let (_backend, mut state) = load_state(&args.manifest.manifest)?;
    let rt = interrupt::runtime()?;
    let report = interrupt::block_on(&rt, async {
        match live_connection(
            &args.connect,
            &args.manifest.manifest,
            &loaded.desired.azure,
        )
        .await?
        {
            Some(conn) => Ok::<_, anyhow::Error>(Some(
                refresh::refresh(&conn.client, &conn.subscription, &mut state).await?,
            )),
            None => Ok(None),
        }
    })??;
    let live = report.is_some();
    let report = report.unwrap_or_default();
    let now = Utc::now();
    let rows = power::vm_statuses(&state, &report.observed, &report.power_since, now);
    out.result(&view::status_text(
        &state,
        &rows,
        &power::hourly_cost(&state),
        now,
        live,
        out.stdout_colour(),
    ));
    if report.has_drift() {
        out.note(&format!(
            "{} resource(s) were deleted and {} changed outside dsinfra: `dsinfra plan` shows what apply would do about it",
            report.deleted.len(),
            report.changed.len()
        ));
    }
    Ok(Outcome::Success)
}

/// `dsinfra output`.
pub fn output(args: &OutputArgs, out: &Output) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let desired = &loaded.desired;
    let mut backend = crate::state::open_backend(
        &args.manifest.manifest,
        loaded.backend.as_ref(),
        &format!("dsinfra output {}", args.manifest.manifest.display()),
    )?;
    let mut state = backend
        .load()?
        .unwrap_or_else(|| State::new(&desired.experiment));
    // Apply stores the non-sensitive outputs resolved (engine/outputs.rs); ARM is asked only for
    // what is shown and still unknown: a sensitive output (never stored) with --show-secrets,
    // or an output the state does not have resolved (an older state, a new output).
    let needs_arm = desired.outputs.iter().any(|o| {
        (!o.sensitive || args.show_secrets)
            && has_unknown(&o.value)
            && state.outputs.get(&o.name).is_none_or(has_unknown)
    });
    let mut observed = RefreshReport::default().observed;
    if needs_arm && !state.resources.is_empty() {
        let rt = interrupt::runtime()?;
        let report = interrupt::block_on(&rt, async {
            match live_connection(&args.connect, &args.manifest.manifest, &desired.azure).await? {
                Some(conn) => Ok::<_, anyhow::Error>(Some(
                    refresh::refresh(&conn.client, &conn.subscription, &mut state).await?,
                )),
                None => Ok(None),
            }
        })??;
        if let Some(report) = report {
            observed = report.observed;
        }
    }
    let mut values = Vec::new();
    for o in &desired.outputs {
        let value = match state.outputs.get(&o.name) {
            Some(saved) if !has_unknown(saved) => saved.clone(),
            _ => resolve_known(&o.value, &observed),
        };
        let shown = (!o.sensitive || args.show_secrets).then_some(value);
        values.push(view::OutputValue {
            name: o.name.clone(),
            value: shown,
            sensitive: o.sensitive,
        });
    }
    if args.show_secrets {
        reveal_sas(args, desired, &state, &mut values)?;
    }
    if let Some(name) = &args.name {
        let Some(found) = values.iter().find(|v| &v.name == name) else {
            let known: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
            let hint = crate::diag::did_you_mean(name, known.iter().copied()).map_or_else(
                || format!("the manifest declares: {}", known.join(", ")),
                |m| format!("did you mean `{m}`?"),
            );
            anyhow::bail!("no output named `{name}`: {hint}");
        };
        let Some(value) = &found.value else {
            anyhow::bail!("output `{name}` is sensitive: add --show-secrets to print it");
        };
        if args.json {
            out.result(&format!("{value}\n"));
        } else {
            out.result(&view::output_raw(value));
        }
        warn_unknown(std::slice::from_ref(found), out);
        return Ok(Outcome::Success);
    }
    if args.json {
        out.result(&view::outputs_json(&values));
    } else {
        out.result(&view::outputs_text(&values));
    }
    warn_unknown(&values, out);
    Ok(Outcome::Success)
}

/// The SAS address an output's value refers to: `value = sas.read` evaluates to
/// `{address = "sas.read", permissions = ...}`.
fn sas_reference(value: &serde_json::Value) -> Option<crate::addr::Address> {
    let address = value.get("address")?.as_str()?;
    address
        .starts_with("sas.")
        .then(|| address.parse().ok())
        .flatten()
}

/// With `--show-secrets`, replaces each shown output that refers to a SAS by its token,
/// re-derived as apply signed it: the account key from `listKeys`, the fields and signing time
/// from the state's identity (checked against its fingerprint). The token is never stored, so
/// this needs a connection; without one the command fails rather than print something else.
fn reveal_sas(
    args: &OutputArgs,
    desired: &crate::model::Desired,
    state: &State,
    values: &mut [view::OutputValue],
) -> anyhow::Result<()> {
    let wanted: Vec<usize> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| args.name.as_ref().is_none_or(|n| n == &v.name))
        .filter(|(_, v)| v.value.as_ref().and_then(sas_reference).is_some())
        .map(|(i, _)| i)
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let rt = interrupt::runtime()?;
    interrupt::block_on(&rt, async {
        let conn = live_connection(&args.connect, &args.manifest.manifest, &desired.azure)
            .await?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "a SAS is not stored: printing it needs a connection to re-sign it (--emulator or --endpoint)"
                )
            })?;
        for i in wanted {
            let address = values[i]
                .value
                .as_ref()
                .and_then(sas_reference)
                .expect("only outputs referring to a SAS were selected");
            let resource = desired
                .resource(&address)
                .ok_or_else(|| anyhow::anyhow!("the manifest has no {address}"))?;
            let identity = state
                .resource(&address)
                .and_then(|r| r.secrets.get("token"))
                .ok_or_else(|| {
                    anyhow::anyhow!("{address} has not been applied: run `dsinfra apply` first")
                })?;
            let key = crate::engine::sas::account_key(
                &conn.client,
                desired,
                &conn.subscription,
                resource,
            )
            .await?;
            let token = crate::engine::sas::resign(resource, &key, &state.lineage, identity)?;
            values[i].value = Some(serde_json::Value::String(token.expose_query().to_owned()));
        }
        Ok::<_, anyhow::Error>(())
    })?
}

fn warn_unknown(values: &[view::OutputValue], out: &Output) {
    let unknown = values
        .iter()
        .filter(|v| v.value.as_ref().is_some_and(has_unknown))
        .count();
    if unknown > 0 {
        out.note(&format!(
            "{unknown} output(s) hold values only Azure knows: apply first, or pass --emulator/--endpoint to read them"
        ));
    }
}

/// `dsinfra state list|show`.
pub fn state(command: &StateCommand, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        StateCommand::List(args) => {
            let (_backend, state) = load_state(&args.manifest)?;
            out.result(&view::state_list(&state));
        }
        StateCommand::Show(args) => {
            let (_backend, state) = load_state(&args.manifest)?;
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
