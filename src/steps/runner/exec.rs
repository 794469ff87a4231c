//! Running one step on one node: its check, its script with the environment and secrets it
//! gets, and a reboot it asks for (waiting for the node to come back with a new boot id).

use std::time::{Duration, Instant};

use crate::ssh::{Exit, Held, ScriptRequest, Session, WaitPolicy};

use crate::steps::log::{StepLog, log_path};
use crate::steps::marker::{
    NodeState, REBOOT_EXIT, RunReason, check_marker_epilogue, parse_state, read_state_command,
    write_marker_epilogue,
};
use crate::steps::spec::NodeSpec;

use super::pool::pool_key;
use super::{CHECK_TIMEOUT, Context, Event, Ran};

/// Reads the boot id and the markers with one unprivileged command, whose shell is then held
/// for the node's first script ([`crate::ssh::Held`]: one channel and one login shell fewer per
/// node than reading and running apart).
pub(super) async fn read_state(
    session: &Session,
    node: &NodeSpec,
) -> Result<(NodeState, Held), String> {
    let (output, held) = session
        .hold(
            &read_state_command(&node.marker_dir, &node.boot_id_path),
            Some(Duration::from_mins(1)),
        )
        .await
        .map_err(|e| e.to_string())?;
    if let Some(state) = parse_state(&output.stdout) {
        return Ok((state, held));
    }
    held.release().await;
    Err(format!(
        "node {}: cannot read the boot id from {}: {}",
        node.name(),
        node.boot_id_path,
        output.stderr.trim()
    ))
}

impl Context {
    /// Runs step `i` on node `index`, streaming its output to the log and the events.
    pub(super) async fn run_step(
        &self,
        session: &Session,
        held: Option<Held>,
        index: usize,
        i: usize,
        reason: RunReason,
    ) -> Result<Ran, String> {
        let node = &self.nodes[index];
        let step = &self.steps[i];
        self.emit(&Event::StepStarted {
            node: node.name(),
            step: &step.name,
            reason,
        });
        let path = log_path(
            &self.options.log_dir,
            &self.options.run_id,
            node.name(),
            &step.name,
        );
        let mut log = StepLog::create(&path);
        let request = ScriptRequest {
            script: step.script.clone(),
            env: self.script_env(index, i),
            secrets: step
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
            files: step
                .files
                .iter()
                .map(|f| (f.name.clone(), f.for_rank(index).to_owned()))
                .collect(),
            privilege: self.options.privilege,
            timeout: step.timeout,
            epilogue: Some(write_marker_epilogue(
                &node.marker_dir,
                &step.name,
                &self.hashes[i],
                &node.boot_id_path,
            )),
        };
        let mut on_line = |stream, line: &str| {
            let line = self.redactor.redact(line);
            log.line(&line);
            self.emit(&Event::Line {
                node: node.name(),
                step: &step.name,
                stream,
                line: &line,
            });
        };
        let result = match held {
            Some(held) => held.run_script(&request, &mut on_line).await,
            None => session.run_script(&request, &mut on_line).await,
        };
        log.finish();
        let log_note = format!("(log: {})", path.display());
        match result {
            Ok(Exit::Code(0)) => Ok(Ran::Done),
            Ok(Exit::Code(REBOOT_EXIT)) => Ok(Ran::Reboot),
            Ok(Exit::Code(code)) => Err(format!("exit status {code} {log_note}")),
            Ok(Exit::Signal(signal)) => Err(format!("killed by signal {signal} {log_note}")),
            Err(e) => Err(format!("{e} {log_note}")),
        }
    }

    /// Runs step `i`'s check on node `index` (with the step's files, as the check is documented
    /// to see what the step sees): `Ok(true)` when it says the work is already done
    /// (its marker is then written by the same remote shell), `Ok(false)` when the step must
    /// run (any other exit status, a timeout included). Only a lost connection is an error.
    /// Output goes to `<step>.check.log`, not to the terminal: a check is a quick question, and
    /// 64 nodes answering it would drown the steps that do run.
    pub(super) async fn run_check(
        &self,
        session: &Session,
        index: usize,
        i: usize,
    ) -> Result<bool, String> {
        let node = &self.nodes[index];
        let step = &self.steps[i];
        let Some(check) = &step.check else {
            return Ok(false);
        };
        let path = log_path(
            &self.options.log_dir,
            &self.options.run_id,
            node.name(),
            &format!("{}.check", step.name),
        );
        let mut log = StepLog::create(&path);
        let request = ScriptRequest {
            script: check.clone(),
            env: self.script_env(index, i),
            secrets: step
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
            files: step
                .files
                .iter()
                .map(|f| (f.name.clone(), f.for_rank(index).to_owned()))
                .collect(),
            privilege: self.options.privilege,
            timeout: Some(step.timeout.map_or(CHECK_TIMEOUT, |t| t.min(CHECK_TIMEOUT))),
            epilogue: Some(check_marker_epilogue(
                &node.marker_dir,
                &step.name,
                &self.hashes[i],
                &node.boot_id_path,
            )),
        };
        let result = session
            .run_script(&request, &mut |_, line| {
                log.line(&self.redactor.redact(line));
            })
            .await;
        let done = match &result {
            Ok(exit) => {
                log.line(&format!(
                    "dsinfra: check {} ({exit:?})",
                    if exit.success() {
                        "says already done"
                    } else {
                        "says run the step"
                    }
                ));
                exit.success()
            }
            Err(_) => false,
        };
        log.finish();
        result.map(|_| done).map_err(|e| {
            format!(
                "the step's check could not run: {e} (log: {})",
                path.display()
            )
        })
    }

    /// The variables a step's script sees: its parameters, then the node's identity
    /// (`DSINFRA_NODE`, `DSINFRA_RANK` counting from 0 at the head, `DSINFRA_NODES`), so one
    /// script can shard work by rank.
    fn script_env(&self, rank: usize, i: usize) -> Vec<(String, String)> {
        let node = &self.nodes[rank];
        let mut env: Vec<(String, String)> = self.steps[i]
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.push(("DSINFRA_NODE".to_owned(), node.name().to_owned()));
        env.push(("DSINFRA_RANK".to_owned(), rank.to_string()));
        env.push(("DSINFRA_NODES".to_owned(), self.nodes.len().to_string()));
        env
    }

    /// Reboots a node after step `i` asked for it, waits for a new boot id, and records the
    /// step's marker in the new boot (so a per-boot step that asked does not run again).
    pub(super) async fn reboot(
        &self,
        session: Session,
        node: &NodeSpec,
        old_boot: &str,
        i: usize,
    ) -> Result<(Session, String), String> {
        // The command may kill the connection before it answers: its outcome says nothing.
        let _ = session
            .output(
                &self.options.reboot_command,
                b"",
                Some(Duration::from_mins(1)),
            )
            .await;
        self.pool.forget(&pool_key(node));
        session.close().await;
        drop(session);

        let limit = self.options.reboot_wait.limit;
        let started = Instant::now();
        loop {
            let remaining = limit.saturating_sub(started.elapsed());
            let wait = WaitPolicy {
                limit: remaining,
                ..self.options.reboot_wait
            };
            let fresh = self.connect(node, &wait).await?;
            let boot_id = fresh
                .boot_id(Some(&node.boot_id_path))
                .await
                .map_err(|e| e.to_string())?;
            if boot_id != old_boot {
                let mut marker = ScriptRequest::new("true");
                marker.privilege = self.options.privilege;
                marker.epilogue = Some(write_marker_epilogue(
                    &node.marker_dir,
                    &self.steps[i].name,
                    &self.hashes[i],
                    &node.boot_id_path,
                ));
                let exit = fresh
                    .run_script(&marker, &mut |_, _| {})
                    .await
                    .map_err(|e| e.to_string())?;
                if !exit.success() {
                    return Err(format!(
                        "cannot record the step marker after the reboot ({exit:?})"
                    ));
                }
                return Ok((fresh, boot_id));
            }
            // Still the old boot: the reboot has not taken the node down yet.
            self.pool.forget(&pool_key(node));
            fresh.close().await;
            if started.elapsed() + Duration::from_secs(1) >= limit {
                return Err(format!(
                    "the node did not reboot within {}s (boot id unchanged)",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
