//! What a run sends to each node, worked out without I/O: the environment a distributed job
//! needs (hostfile, head address, rank, node count, the block's mount points), the files that
//! carry it, and the shell that starts the job attached or detached. Everything lands in the
//! node's run directory (`<runs dir>/<vm name>/<id>/`, docs/run.md), which is also what tells
//! a watcher on the node that a job is running.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::Step;
use crate::ssh::shell_quote;
use crate::steps::library::mount_point;

/// The port torchrun's rendezvous listens on by default (`MASTER_PORT`).
pub const MASTER_PORT: u16 = 29500;

/// The limits a detached job's systemd unit gets: what a login on the HPC images has from
/// `/etc/security/limits.conf` (memlock unlimited, which RDMA memory registration needs), which
/// systemd services never read; and many open files (NCCL, data loaders).
pub const SYSTEMD_LIMITS: [&str; 2] = ["LimitMEMLOCK=infinity", "LimitNOFILE=1048576"];

/// Where run directories live on a node: `<base>/<vm name>/<id>/`.
pub const DEFAULT_RUNS_DIR: &str = "/var/lib/dsinfra/runs";

/// One node of the job as the job sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNode {
    /// Its name in dsinfra (`cluster.train[1]`).
    pub node: String,
    /// Its Azure VM name: names its run directory.
    pub vm_name: String,
    /// The address other nodes reach it at (its private IP).
    pub host: String,
    /// Where its VM's instance metadata service answers, when it is a spot VM whose Scheduled
    /// Events are watched during the run (`http://169.254.169.254`; an emulator's stand-in per
    /// VM); `None` for regular VMs.
    pub imds: Option<String>,
}

/// Everything common to the nodes of one job.
#[derive(Debug, Clone)]
pub struct Job {
    /// The run's id.
    pub id: String,
    /// The command line, as the user gave it (words joined by spaces, as `ssh` does).
    pub command: String,
    /// The nodes, head first; a node's rank is its position.
    pub nodes: Vec<JobNode>,
    /// Processes per node: GPUs per node from the catalog, 1 on CPU sizes.
    pub slots: u32,
    /// Mount points the block's steps made: `(variable, path)`.
    pub mounts: Vec<(String, String)>,
    /// The base of the run directories on the nodes.
    pub runs_dir: String,
    /// How many times the job was started again after an eviction (`DSINFRA_RESTART_COUNT`).
    pub restart: u32,
    /// Where the job keeps its checkpoints (`DSINFRA_CHECKPOINT_DIR`), when known.
    pub checkpoint_dir: Option<String>,
    /// `--on-preempt`: the command a node runs when its VM is about to be evicted.
    pub on_preempt: Option<String>,
    /// Seconds between the Scheduled Events polls of the preemption watcher.
    pub preempt_poll: u32,
}

/// GPUs per node for `size` (from the catalog), 1 for CPU sizes and unknown sizes; fractional
/// GPUs (a slice of one) count as one process.
pub fn slots_for(catalog: &crate::catalog::Catalog, size: Option<&str>) -> u32 {
    size.and_then(|size| catalog.vm_size(size))
        .map(|s| s.gpus)
        .filter(|g| *g >= 1.0)
        .map_or(1, |g| {
            // Catalog GPU counts are small whole numbers (1..16); the cast cannot truncate.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let whole = g.floor() as u32;
            whole
        })
}

/// The variables for the mount points the `block`'s steps make: `DSINFRA_MOUNT_<STEP>` for each
/// (the step name upper-cased, other characters `_`) and `DSINFRA_SCRATCH` for the first BeeOND
/// scratch.
pub fn mounts(steps: &[Step], block: &crate::addr::Address) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    let mut scratch = None;
    for step in steps.iter().filter(|s| s.block == *block) {
        let explicit = step.params.get("mount").and_then(Value::as_str);
        let Some(path) = mount_point(&step.kind, explicit) else {
            continue;
        };
        let name: String = step
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        vars.push((format!("DSINFRA_MOUNT_{name}"), path.to_owned()));
        if step.kind == "beeond" && scratch.is_none() {
            scratch = Some(path.to_owned());
        }
    }
    if let Some(path) = scratch {
        vars.push(("DSINFRA_SCRATCH".to_owned(), path));
    }
    vars
}

/// Where a job on `block` checkpoints unless told: `checkpoints` under the mount of its first
/// step whose storage outlives the VMs and is the same on every node (a file share, a Blob
/// container, an NFS export); never the BeeOND scratch, a data disk (one node's) or the temp
/// disk, which an eviction takes.
pub fn durable_checkpoint_dir(steps: &[Step], block: &crate::addr::Address) -> Option<String> {
    const DURABLE: [&str; 4] = ["azure_files", "blobfuse2", "blobfuse", "nfs_cache"];
    steps
        .iter()
        .filter(|s| s.block == *block && DURABLE.contains(&s.kind.as_str()))
        .find_map(|s| mount_point(&s.kind, s.params.get("mount").and_then(Value::as_str)))
        .map(|path| format!("{}/checkpoints", path.trim_end_matches('/')))
}

impl Job {
    /// This job (made for the nodes as they are now) as the next attempt of `before`: its id,
    /// hook and checkpoint directory, one restart more.
    pub fn again(mut self, before: Self) -> Self {
        self.id = before.id;
        self.restart = before.restart + 1;
        self.on_preempt = before.on_preempt;
        self.checkpoint_dir = before.checkpoint_dir;
        self
    }

    /// The run directory of `node` on its VM.
    pub fn dir(&self, node: &JobNode) -> String {
        format!(
            "{}/{}/{}",
            self.runs_dir.trim_end_matches('/'),
            node.vm_name,
            self.id
        )
    }

    /// The hostfile: `host slots=N` per node, head first, the format OpenMPI's `mpirun
    /// --hostfile` and DeepSpeed's `--hostfile` both read.
    pub fn hostfile(&self) -> String {
        self.nodes.iter().fold(String::new(), |mut out, n| {
            let _ = writeln!(out, "{} slots={}", n.host, self.slots);
            out
        })
    }

    /// The nodefile: one host per line (PBS's `$PBS_NODEFILE`, MPICH's `-f`).
    pub fn nodefile(&self) -> String {
        self.nodes.iter().fold(String::new(), |mut out, n| {
            let _ = writeln!(out, "{}", n.host);
            out
        })
    }

    /// The environment of the job on the node at `rank`, in order.
    pub fn env(&self, rank: usize) -> Vec<(String, String)> {
        let node = &self.nodes[rank];
        let dir = self.dir(node);
        let head = self.nodes.first().map_or("", |n| n.host.as_str());
        let mut vars = vec![
            ("DSINFRA_RUN_ID", self.id.clone()),
            ("DSINFRA_RUN_DIR", dir.clone()),
            ("DSINFRA_NODE", node.node.clone()),
            ("DSINFRA_RANK", rank.to_string()),
            ("DSINFRA_NODES", self.nodes.len().to_string()),
            ("DSINFRA_HEAD", head.to_owned()),
            ("DSINFRA_SLOTS", self.slots.to_string()),
            ("DSINFRA_HOSTFILE", format!("{dir}/hostfile")),
            ("DSINFRA_NODEFILE", format!("{dir}/nodefile")),
            ("MASTER_ADDR", head.to_owned()),
            ("MASTER_PORT", MASTER_PORT.to_string()),
            ("NODE_RANK", rank.to_string()),
            ("NNODES", self.nodes.len().to_string()),
            ("NPROC_PER_NODE", self.slots.to_string()),
            // pdsh's own default is rsh, which Azure nodes do not run.
            ("PDSH_RCMD_TYPE", "ssh".to_owned()),
            // 0 on the first start, then one more at each start after an eviction: a job that
            // checkpoints resumes when it is not 0.
            ("DSINFRA_RESTART_COUNT", self.restart.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect::<Vec<_>>();
        vars.extend(self.mounts.iter().cloned());
        if let Some(dir) = &self.checkpoint_dir {
            vars.push(("DSINFRA_CHECKPOINT_DIR".to_owned(), dir.clone()));
        }
        vars
    }

    /// The files delivered to the node at `rank` (the wrapper's `$DSINFRA_FILES`), copied into
    /// its run directory by [`Job::start_script`].
    pub fn files(&self, rank: usize) -> Vec<(String, String)> {
        let env = self
            .env(rank)
            .iter()
            .fold(String::new(), |mut out, (k, v)| {
                let _ = writeln!(out, "export {k}={}", shell_quote(v));
                out
            });
        let mut files = vec![
            ("hostfile".to_owned(), self.hostfile()),
            ("nodefile".to_owned(), self.nodefile()),
            ("env.sh".to_owned(), env),
            ("command.sh".to_owned(), format!("{}\n", self.command)),
            ("job.sh".to_owned(), self.job_script(rank)),
        ];
        let node = &self.nodes[rank];
        if let Some(imds) = &node.imds {
            files.push((
                "preempt.py".to_owned(),
                super::preempt::watcher_script(&node.vm_name, imds, self.preempt_poll),
            ));
            if let Some(hook) = &self.on_preempt {
                files.push(("on_preempt.sh".to_owned(), format!("{hook}\n")));
            }
        }
        files
    }

    /// The job itself, as it runs on the node: records its pid and state in the run directory,
    /// runs the command in the job's environment from the login directory, then records the
    /// exit status (before the state, so a reader that sees `done` always finds the status).
    /// A SIGTERM to the job's process group (Ctrl-C, a shutdown) ends the command, not this
    /// shell: the trap (a caught signal, unlike an ignored one, is reset for the command) lets it
    /// record the command's 143.
    fn job_script(&self, rank: usize) -> String {
        let dir = shell_quote(&self.dir(&self.nodes[rank]));
        format!(
            "dir={dir}\n\
             umask 022\n\
             echo $$ > \"$dir/pid\"\n\
             date -u +%Y-%m-%dT%H:%M:%SZ > \"$dir/started\"\n\
             echo running > \"$dir/state\"\n\
             if [ -f \"$dir/session.env\" ]; then . \"$dir/session.env\"; fi\n\
             . \"$dir/env.sh\"\n\
             cd \"$HOME\" 2>/dev/null || cd /\n\
             trap : TERM HUP\n\
             watcher=\n\
             if [ -f \"$dir/preempt.py\" ]; then python3 \"$dir/preempt.py\" & watcher=$!; fi\n\
             bash \"$dir/command.sh\"\n\
             rc=$?\n\
             if [ -n \"$watcher\" ]; then kill \"$watcher\" 2>/dev/null; fi\n\
             echo \"$rc\" > \"$dir/exit.tmp\" && mv -f \"$dir/exit.tmp\" \"$dir/exit\"\n\
             echo 'done' > \"$dir/state\"\n\
             exit \"$rc\"\n"
        )
    }

    /// The script the SSH session runs (through the stdin wrapper, as the admin user): make the
    /// run directory (with `sudo -n` when the base is not the user's), copy the files in, then
    /// run the job in the foreground, or start it detached (a systemd unit where systemd runs,
    /// else `setsid nohup` with its pid in the run directory) and return at once.
    pub fn start_script(&self, rank: usize, detach: bool) -> String {
        let node = &self.nodes[rank];
        let base = shell_quote(&format!(
            "{}/{}",
            self.runs_dir.trim_end_matches('/'),
            node.vm_name
        ));
        let dir = shell_quote(&self.dir(node));
        let mut script = format!(
            "base={base}\n\
             dir={dir}\n\
             if ! mkdir -p \"$dir\" 2>/dev/null; then\n\
             \x20 if ! {{ sudo -n install -d -o \"$(id -u)\" -g \"$(id -g)\" \"$base\" && mkdir -p \"$dir\"; }}; then\n\
             \x20   echo \"dsinfra: cannot create the run directory $dir\" >&2; exit 125\n\
             \x20 fi\n\
             fi\n\
             rm -f \"$dir/pid\" \"$dir/exit\" \"$dir/preempt\" \"$dir/preempt.py\" \"$dir/on_preempt.sh\"\n\
             for f in \"$DSINFRA_FILES\"/*; do cp \"$f\" \"$dir/\"; done\n\
             echo starting > \"$dir/state\"\n"
        );
        if detach {
            // A systemd service starts with systemd's environment and limits, not the login's:
            // the session's environment is kept for the job to read back, and the limits the
            // HPC images give logins in limits.conf (memlock unlimited: InfiniBand memory
            // registration for NCCL, UCX and MPI) are set on the unit (SYSTEMD_LIMITS).
            let _ = write!(
                script,
                "(umask 077 && export -p > \"$dir/session.env\")\n\
                 unit=dsinfra-run-{id}\n\
                 if [ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1 &&\n\
                 \x20  sudo -n systemd-run --quiet --unit=\"$unit\" --uid=\"$(id -u)\" --gid=\"$(id -g)\" \\\n\
                 \x20    {limits} \\\n\
                 \x20    --property=StandardOutput=append:\"$dir/log\" --property=StandardError=append:\"$dir/log\" \\\n\
                 \x20    bash \"$dir/job.sh\" 2>/dev/null; then\n\
                 \x20 echo \"systemd $unit\" > \"$dir/runner\"\n\
                 else\n\
                 \x20 setsid nohup bash \"$dir/job.sh\" >> \"$dir/log\" 2>&1 < /dev/null &\n\
                 \x20 echo \"setsid $!\" > \"$dir/runner\"\n\
                 fi\n",
                id = self.id,
                limits = SYSTEMD_LIMITS
                    .iter()
                    .map(|p| format!("--property={p}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        } else {
            script.push_str("bash \"$dir/job.sh\"\n");
        }
        script
    }
}

/// The shell that reports a run directory's state in one line: `<state> <exit or ->`, where a
/// `running` job whose process is gone (the VM rebooted, the job was killed) is `lost`. The exit
/// status is read last: the job writes it before `done`, so a job that ends while the probe
/// runs is seen with its status rather than as `done` without one.
pub fn state_probe(dir: &str) -> String {
    let dir = shell_quote(dir);
    format!(
        "dir={dir}\n\
         [ -d \"$dir\" ] || {{ echo 'missing -'; exit 0; }}\n\
         state=$(cat \"$dir/state\" 2>/dev/null || echo starting)\n\
         if [ \"$state\" = running ] && ! kill -0 \"$(cat \"$dir/pid\" 2>/dev/null)\" 2>/dev/null; then\n\
         \x20 if [ -f \"$dir/exit\" ]; then state='done'; else state='lost'; fi\n\
         fi\n\
         code=$(cat \"$dir/exit\" 2>/dev/null || echo -)\n\
         echo \"$state $code\"\n"
    )
}

/// The shell that prints a detached run's log from its line `skip + 1` (the lines before were
/// printed already: a recovered run followed again), and with `follow` keeps printing it until
/// the job's process ends (`tail --pid`), then the closing state line of [`state_probe`] on
/// stderr.
pub fn log_script(dir: &str, follow: bool, skip: usize) -> String {
    let quoted = shell_quote(dir);
    let from = skip + 1;
    let mut script = format!("dir={quoted}\ntouch \"$dir/log\" 2>/dev/null\n");
    if follow {
        let _ = write!(
            script,
            "for _ in $(seq 50); do [ -s \"$dir/pid\" ] && break; sleep 0.1; done\n\
             pid=$(cat \"$dir/pid\" 2>/dev/null)\n\
             if [ -n \"$pid\" ] && kill -0 \"$pid\" 2>/dev/null; then\n\
             \x20 tail -n +{from} -f --pid=\"$pid\" \"$dir/log\"\n\
             else\n\
             \x20 tail -n +{from} \"$dir/log\"\n\
             fi\n",
        );
    } else {
        let _ = writeln!(script, "tail -n +{from} \"$dir/log\"");
    }
    script
        .push_str(&state_probe(dir).replace("echo \"$state $code\"", "echo \"$state $code\" >&2"));
    script
}

/// The shell that stops a run's job on a node (Ctrl-C during an attached run): its whole process
/// group, which holds the command and everything it started.
pub fn stop_script(dir: &str) -> String {
    let dir = shell_quote(dir);
    format!(
        "pid=$(cat {dir}/pid 2>/dev/null) || exit 0\n\
         pgid=$(ps -o pgid= -p \"$pid\" | tr -d ' ')\n\
         [ -n \"$pgid\" ] && kill -TERM -- \"-$pgid\" 2>/dev/null\n\
         exit 0\n"
    )
}

/// Parses the line [`state_probe`] prints: the state word and the exit status, if any.
pub fn parse_probe(line: &str) -> Option<(String, Option<i32>)> {
    let mut words = line.split_whitespace();
    let state = words.next()?.to_owned();
    let code = words.next().and_then(|c| c.parse().ok());
    Some((state, code))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn job(slots: u32, hosts: &[&str]) -> Job {
        Job {
            id: "20261126T221500-3f2a".to_owned(),
            command: "true".to_owned(),
            nodes: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| JobNode {
                    node: format!("cluster.c[{i}]"),
                    vm_name: format!("vm{i}"),
                    host: (*h).to_owned(),
                    imds: None,
                })
                .collect(),
            slots,
            mounts: Vec::new(),
            runs_dir: DEFAULT_RUNS_DIR.to_owned(),
            restart: 0,
            checkpoint_dir: None,
            on_preempt: None,
            preempt_poll: 5,
        }
    }

    /// A job checkpoints under a shared, durable mount: a file share, Blob or NFS, not BeeOND.
    #[test]
    fn checkpoints_go_to_the_first_durable_shared_mount() {
        let block: crate::addr::Address = "cluster.c".parse().expect("address");
        let step = |name: &str, kind: &str, mount: Option<&str>| Step {
            block: block.clone(),
            name: name.to_owned(),
            kind: kind.to_owned(),
            scope: crate::model::StepScope::All,
            run: crate::model::RunPolicy::PerBoot,
            params: mount
                .map(|m| ("mount".to_owned(), Value::from(m)))
                .into_iter()
                .collect(),
            span: None,
        };
        let steps = vec![
            step("beeond", "beeond", None),
            step("results", "azure_files", Some("/mnt/results/")),
            step("blob", "blobfuse2", None),
        ];
        assert_eq!(
            durable_checkpoint_dir(&steps, &block).as_deref(),
            Some("/mnt/results/checkpoints")
        );
        assert_eq!(
            durable_checkpoint_dir(&steps[2..], &block).as_deref(),
            Some("/mnt/blob/checkpoints")
        );
        assert_eq!(durable_checkpoint_dir(&steps[..1], &block), None);
    }

    #[test]
    fn slots_are_whole_gpus_per_node_and_one_on_cpu_sizes() {
        let catalog = crate::catalog::Catalog::shipped();
        assert_eq!(slots_for(&catalog, Some("Standard_ND40rs_v2")), 8);
        assert_eq!(slots_for(&catalog, Some("Standard_D2s_v3")), 1);
        assert_eq!(slots_for(&catalog, None), 1);
    }

    #[test]
    fn hostfile_lists_the_head_first_with_its_slots() {
        let job = job(8, &["10.0.1.4", "10.0.1.5"]);
        assert_eq!(job.hostfile(), "10.0.1.4 slots=8\n10.0.1.5 slots=8\n");
        assert_eq!(job.nodefile(), "10.0.1.4\n10.0.1.5\n");
        let env: BTreeMap<_, _> = job.env(1).into_iter().collect();
        assert_eq!(env["MASTER_ADDR"], "10.0.1.4");
        assert_eq!(env["NODE_RANK"], "1");
        assert_eq!(env["NNODES"], "2");
        assert_eq!(
            env["DSINFRA_HOSTFILE"],
            "/var/lib/dsinfra/runs/vm1/20261126T221500-3f2a/hostfile"
        );
    }

    #[test]
    fn mount_points_come_from_the_blocks_steps() {
        let block: crate::addr::Address = "cluster.c".parse().expect("address");
        let step = |name: &str, kind: &str, mount: Option<&str>| Step {
            block: block.clone(),
            name: name.to_owned(),
            kind: kind.to_owned(),
            scope: crate::model::StepScope::All,
            run: crate::model::RunPolicy::Once,
            params: mount
                .map(|m| [("mount".to_owned(), Value::String(m.to_owned()))].into())
                .unwrap_or_default(),
            span: None,
        };
        let steps = [
            step("beeond", "beeond", None),
            step("data-in", "blobfuse2", Some("/data/in")),
            step("hello", "script", None),
        ];
        assert_eq!(
            mounts(&steps, &block),
            [
                ("DSINFRA_MOUNT_BEEOND".to_owned(), "/mnt/scratch".to_owned()),
                ("DSINFRA_MOUNT_DATA_IN".to_owned(), "/data/in".to_owned()),
                ("DSINFRA_SCRATCH".to_owned(), "/mnt/scratch".to_owned()),
            ]
        );
    }

    /// Every script a run sends passes shellcheck (as the step templates do); under CI a
    /// missing shellcheck fails the test, locally it says why it checked nothing.
    #[test]
    fn the_scripts_pass_shellcheck() {
        let mut job = job(8, &["10.0.1.4", "10.0.1.5"]);
        job.mounts = vec![("DSINFRA_SCRATCH".to_owned(), "/mnt/scratch".to_owned())];
        let scripts = [
            ("start, attached", job.start_script(1, false)),
            ("start, detached", job.start_script(0, true)),
            ("job", job.job_script(1)),
            ("probe", state_probe("/var/lib/dsinfra/runs/vm0/x")),
            (
                "logs -f",
                log_script("/var/lib/dsinfra/runs/vm0/x", true, 0),
            ),
            ("logs", log_script("/var/lib/dsinfra/runs/vm0/x", false, 0)),
            ("stop", stop_script("/var/lib/dsinfra/runs/vm0/x")),
            ("env.sh", job.files(1)[2].1.clone()),
        ];
        for (what, text) in scripts {
            let checked = std::process::Command::new("shellcheck")
                .args(["-s", "bash", "-e", "SC1091", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write as _;
                    child
                        .stdin
                        .take()
                        .expect("piped")
                        .write_all(text.as_bytes())?;
                    child.wait_with_output()
                });
            match checked {
                Ok(out) => assert!(
                    out.status.success(),
                    "{what}:\n{text}\n{}",
                    String::from_utf8_lossy(&out.stdout)
                ),
                Err(e) if std::env::var_os("CI").is_some() => panic!("shellcheck: {e}"),
                Err(e) => {
                    eprintln!("shellcheck not run ({e}): install it (apt: shellcheck)");
                    return;
                }
            }
        }
    }

    /// Issue 30: a detached job under systemd gets the login's memlock and open-file limits and
    /// the SSH session's environment (this machine runs no systemd, so the unit's properties
    /// are read from the script; the `setsid` path inherits both from the session).
    #[test]
    fn detached_jobs_get_the_logins_limits_and_environment() {
        let job = job(8, &["10.0.1.4", "10.0.1.5"]);
        let start = job.start_script(0, true);
        let systemd_run = start
            .lines()
            .skip_while(|l| !l.contains("systemd-run"))
            .take_while(|l| !l.contains("then"))
            .collect::<Vec<_>>()
            .join("\n");
        for property in [
            "--property=LimitMEMLOCK=infinity",
            "--property=LimitNOFILE=1048576",
        ] {
            assert!(systemd_run.contains(property), "{systemd_run}");
        }
        let saved = start
            .find("export -p > \"$dir/session.env\"")
            .expect("the session's environment is kept");
        assert!(saved < start.find("systemd-run").expect("systemd-run"));
        assert!(start.contains("(umask 077 && export -p"), "kept private");
        let script = job.job_script(0);
        let session = script.find("session.env").expect("read back");
        assert!(session < script.find("env.sh").expect("the job's own variables last"));
        assert!(!job.start_script(0, false).contains("session.env"));
    }

    #[test]
    fn probe_lines_parse() {
        assert_eq!(parse_probe("done 3"), Some(("done".to_owned(), Some(3))));
        assert_eq!(parse_probe("running -"), Some(("running".to_owned(), None)));
        assert_eq!(parse_probe(""), None);
    }
}
