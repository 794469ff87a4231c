//! Fan-out benchmark: the same 20 KiB script (it writes 5 files and sleeps 0.2 s) on 1, 8, 16
//! and 32 real sshd hosts, with dsinfra's step runner and, on the same hosts and key exchange
//! (the harness's sshd only offers curve25519-sha256), OpenSSH in parallel, the parallel-ssh
//! Python library and Ansible. Writes a markdown table of median wall seconds.
//!
//! Run it through scripts/bench-ssh.sh, which prepares the Python tools. Arguments:
//! `--sizes 1,8,16,32 --runs 5 --venv DIR --out target/bench/ssh.md`.

#[path = "../tests/common/sshd.rs"]
mod sshd;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use dsinfra::ssh::Privilege;
use dsinfra::steps::{self, NodeSpec, RunOptions, RunPolicy, StepSpec};

struct Args {
    sizes: Vec<usize>,
    runs: usize,
    venv: Option<PathBuf>,
    out: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args {
        sizes: vec![1, 8, 16, 32],
        runs: 5,
        venv: None,
        out: PathBuf::from("target/bench/ssh.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        // `cargo bench` passes `--bench`; ignore anything we do not know.
        let mut value = || it.next().expect("flag needs a value");
        match flag.as_str() {
            "--sizes" => {
                args.sizes = value()
                    .split(',')
                    .map(|s| s.parse().expect("sizes are numbers"))
                    .collect();
            }
            "--runs" => args.runs = value().parse().expect("runs is a number"),
            "--venv" => args.venv = Some(PathBuf::from(value())),
            "--out" => args.out = PathBuf::from(value()),
            _ => {}
        }
    }
    args
}

/// 20 KiB: a real body plus comment padding, like a rendered template with its docs.
fn script() -> String {
    let mut text = String::from(
        "#!/bin/bash\nset -eu\nd=$(mktemp -d)\nfor i in 1 2 3 4 5; do echo \"file $i\" > \"$d/f$i\"; done\nsleep 0.2\nrm -rf \"$d\"\necho done\n",
    );
    while text.len() < 20 * 1024 {
        text.push_str(
            "# padding so the script is as large as a real step template with comments.\n",
        );
    }
    text
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Times `runs` runs after one warm-up (ControlPersist masters, page cache) and returns the median.
fn measure(runs: usize, mut run: impl FnMut() -> bool) -> Option<f64> {
    if !run() {
        return None;
    }
    let mut samples = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        if !run() {
            return None;
        }
        samples.push(start.elapsed().as_secs_f64());
    }
    Some(median(samples))
}

fn dsinfra_runner(
    runtime: &tokio::runtime::Runtime,
    hosts: &sshd::TestHosts,
    nodes: &[NodeSpec],
    script: &str,
    privilege: Privilege,
) -> bool {
    // Markers written as root are not writable by the login user: give each privilege its own.
    let nodes: Vec<NodeSpec> = nodes
        .iter()
        .cloned()
        .map(|mut node| {
            if privilege == Privilege::User {
                node.marker_dir = format!("/tmp/dsinfra-bench-markers-{}", node.target.port);
            }
            node
        })
        .collect();
    let mut step = StepSpec::new("bench", script);
    step.policy = RunPolicy::Always;
    let mut options = RunOptions::new("bench", hosts.dir().join("logs"), hosts.auth());
    options.privilege = privilege;
    let report = runtime
        .block_on(steps::run(&nodes, &[step], &options))
        .expect("valid input");
    if !report.success() {
        eprintln!("dsinfra run failed:\n{report}");
    }
    report.success()
}

fn openssh_parallel(hosts: &[&sshd::Host], key: &Path, known: &Path, script: &str) -> bool {
    let children: Vec<_> = hosts
        .iter()
        .map(|host| {
            let mut child = Command::new("ssh")
                .args([
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "KexAlgorithms=curve25519-sha256",
                ])
                .arg("-o")
                .arg(format!("UserKnownHostsFile={}", known.display()))
                .args(["-o", "StrictHostKeyChecking=yes", "-i"])
                .arg(key)
                .args(["-p", &host.port.to_string()])
                .arg(format!("{}@127.0.0.1", sshd::TEST_USER))
                .arg("f=$(mktemp) && cat > \"$f\" && bash \"$f\"; rc=$?; rm -f \"$f\"; exit $rc")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("ssh starts");
            let mut stdin = child.stdin.take().expect("stdin is piped");
            std::io::Write::write_all(&mut stdin, script.as_bytes()).expect("script written");
            drop(stdin);
            child
        })
        .collect();
    children
        .into_iter()
        .all(|mut c| c.wait().is_ok_and(|s| s.success()))
}

const PSSH_DRIVER: &str = r"
import sys, json
from gevent import joinall, spawn
from pssh.clients import SSHClient
ports, key, script, user = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def one(port):
    client = SSHClient('127.0.0.1', port=port, user=user, pkey=key, num_retries=1)
    remote = '/tmp/dsinfra-bench-pssh-%d.sh' % port
    client.copy_file(script, remote)
    out = client.run_command('bash %s; rc=$?; rm -f %s; exit $rc' % (remote, remote))
    client.wait_finished(out)
    list(out.stdout)
    return out.exit_code
jobs = [spawn(one, p) for p in ports]
joinall(jobs, raise_error=True)
sys.exit(0 if all(j.value == 0 for j in jobs) else 1)
";

fn run_quiet(command: &mut Command) -> bool {
    let output = command.output().expect("tool starts");
    if !output.status.success() {
        eprintln!(
            "{:?} failed:\n{}{}",
            command,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output.status.success()
}

fn ansible_setup(dir: &Path, hosts: &[&sshd::Host], key: &Path, script: &Path) -> PathBuf {
    let work = dir.join(format!("ansible-{}", hosts.len()));
    std::fs::create_dir_all(&work).expect("ansible dir");
    let mut inventory = String::from("[bench]\n");
    for host in hosts {
        let _ = writeln!(
            inventory,
            "{} ansible_host=127.0.0.1 ansible_port={} ansible_user={} ansible_ssh_private_key_file={}",
            host.name,
            host.port,
            sshd::TEST_USER,
            key.display()
        );
    }
    std::fs::write(work.join("inventory"), inventory).expect("inventory");
    std::fs::write(
        work.join("ansible.cfg"),
        format!(
            "[defaults]\nhost_key_checking = False\nforks = 64\ninterpreter_python = auto_silent\n\
             [ssh_connection]\npipelining = True\ncontrol_path_dir = {}/cp\n\
             ssh_args = -o ControlMaster=auto -o ControlPersist=120s -o KexAlgorithms=curve25519-sha256\n",
            work.display()
        ),
    )
    .expect("ansible.cfg");
    std::fs::write(
        work.join("play.yml"),
        format!(
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - copy: {{src: {}, dest: \"/tmp/dsinfra-bench-{{{{ inventory_hostname }}}}.sh\"}}\n    - shell: bash /tmp/dsinfra-bench-{{{{ inventory_hostname }}}}.sh\n",
            script.display()
        ),
    )
    .expect("playbook");
    work
}

fn ansible(venv: &Path, work: &Path, args: &[&str]) -> bool {
    let (program, rest) = args.split_first().expect("a command");
    run_quiet(
        Command::new(venv.join("bin").join(program))
            .args(rest)
            .args(["-i", "inventory"])
            .current_dir(work)
            .env("ANSIBLE_CONFIG", work.join("ansible.cfg")),
    )
}

/// The markdown table: one row per tool, one column per host count, ratios to OpenSSH.
fn render_table(args: &Args, rows: &[(&str, Vec<Option<f64>>)]) -> String {
    let mut table = format!(
        "Median wall seconds of {} runs (after one warm-up), 20 KiB script, curve25519-sha256, \
         sshd on the same machine.\n\n| tool |",
        args.runs
    );
    for n in &args.sizes {
        let _ = write!(table, " {n} host{} |", if *n == 1 { "" } else { "s" });
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(args.sizes.len()));
    table.push('\n');
    let openssh = rows[2].1.clone();
    for (name, values) in rows {
        let _ = write!(table, "| {name} |");
        for (value, base) in values.iter().zip(&openssh) {
            match (value, base) {
                (Some(v), Some(b)) => {
                    let _ = write!(table, " {v:.2} ({:.2}x) |", v / b);
                }
                (Some(v), None) => {
                    let _ = write!(table, " {v:.2} |");
                }
                (None, _) => table.push_str(" n/a |"),
            }
        }
        table.push('\n');
    }
    table.push_str("\n(ratio) = time / OpenSSH-parallel time at the same host count.\n");
    table
}

/// A known_hosts file pinning every host's key, so OpenSSH checks keys as dsinfra does.
fn write_known_hosts(hosts: &sshd::TestHosts) -> PathBuf {
    let mut lines = String::new();
    for host in &hosts.hosts {
        let _ = writeln!(
            lines,
            "[127.0.0.1]:{} {}",
            host.port,
            host.public_key.to_openssh()
        );
    }
    let path = hosts.dir().join("known_hosts");
    std::fs::write(&path, lines).expect("known_hosts written");
    path
}

fn main() {
    let args = parse_args();
    let max = args.sizes.iter().copied().max().unwrap_or(1);
    let Some(hosts) = sshd::start(max) else {
        eprintln!("no sshd test hosts: nothing measured");
        std::process::exit(1);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let script = script();
    let script_path = hosts.dir().join("bench.sh");
    std::fs::write(&script_path, &script).expect("script written");
    let known = write_known_hosts(&hosts);

    let python = args.venv.as_ref().map(|v| v.join("bin/python"));
    let mut rows: Vec<(&str, Vec<Option<f64>>)> = vec![
        ("dsinfra runner (russh, `sudo -n bash -s`, markers)", vec![]),
        ("dsinfra runner (russh, as login user, markers)", vec![]),
        (
            "OpenSSH in parallel, one connection per host (`cat >f && bash f`)",
            vec![],
        ),
        ("parallel-ssh library: SFTP copy_file + run_command", vec![]),
        (
            "Ansible `script` module, ControlPersist + pipelining",
            vec![],
        ),
        (
            "Ansible playbook copy + shell, ControlPersist + pipelining",
            vec![],
        ),
    ];
    for &n in &args.sizes {
        let subset: Vec<&sshd::Host> = hosts.hosts.iter().take(n).collect();
        let nodes: Vec<NodeSpec> = subset.iter().map(|h| h.node()).collect();
        eprintln!("measuring {n} host(s)");
        let mut results = vec![
            measure(args.runs, || {
                dsinfra_runner(&runtime, &hosts, &nodes, &script, Privilege::Sudo)
            }),
            measure(args.runs, || {
                dsinfra_runner(&runtime, &hosts, &nodes, &script, Privilege::User)
            }),
            measure(args.runs, || {
                openssh_parallel(&subset, &hosts.client_key, &known, &script)
            }),
        ];
        match (&python, &args.venv) {
            (Some(python), Some(venv)) => {
                let ports = format!(
                    "[{}]",
                    subset
                        .iter()
                        .map(|h| h.port.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                );
                results.push(measure(args.runs, || {
                    run_quiet(
                        Command::new(python)
                            .args(["-c", PSSH_DRIVER, &ports])
                            .arg(&hosts.client_key)
                            .arg(&script_path)
                            .arg(sshd::TEST_USER),
                    )
                }));
                let work = ansible_setup(hosts.dir(), &subset, &hosts.client_key, &script_path);
                let script_arg = script_path.display().to_string();
                results.push(measure(args.runs, || {
                    ansible(
                        venv,
                        &work,
                        &["ansible", "all", "-m", "script", "-a", &script_arg],
                    )
                }));
                results.push(measure(args.runs, || {
                    ansible(venv, &work, &["ansible-playbook", "play.yml"])
                }));
            }
            _ => results.extend([None, None, None]),
        }
        for (row, result) in rows.iter_mut().zip(results) {
            row.1.push(result);
        }
    }

    let table = render_table(&args, &rows);
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent).expect("output dir");
    }
    std::fs::write(&args.out, &table).expect("table written");
    print!("{table}");
    drop(hosts);
}
