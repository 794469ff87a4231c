//! Real OpenSSH test hosts: private `sshd -D` processes on 127.0.0.1, each with its own port,
//! directory and ed25519 host key, all letting one dedicated test user in with a client key
//! generated for this run. Used by tests/ssh.rs and reusable by later end-to-end tests and the
//! fan-out benchmark (`#[path]`-included there).
//!
//! Why real sshd: the SSH layer is only as honest as its peer (style.md, rule 12), and the things
//! that matter (host-key checks, `sudo -n bash -s`, what `ps` shows, jump channels) are
//! properties of OpenSSH, not of a fake.
//!
//! Setup facts come from shared/reference/test-harness.md: `/run/sshd` must exist; the user is
//! created with `useradd -M -p '*'` (a `!` password makes sshd without PAM treat it as locked);
//! it gets a NOPASSWD sudo rule so scripts really go through `sudo -n`. Each sshd is stopped by
//! the pid in its pid file when the [`TestHosts`] value drops, never by process name.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dsinfra::ssh::{Auth, HostKey, HostKeyPair, HostKeyPolicy, Target};
use dsinfra::steps::NodeSpec;

/// The login user on every test host.
pub const TEST_USER: &str = "dsinfra-test";
const TEST_HOME: &str = "/var/tmp/dsinfra-test-home";
/// A second login user, for tests where the VMs' admin user is not the mesh's login user and
/// has a real home whose `~/.ssh` OpenSSH reads by itself (the admin user's mesh, which
/// `mpirun` and `pdsh` use): one test at a time holds it ([`AdminUser::take`]).
pub const ADMIN_USER: &str = "dsinfra-admin";
const ADMIN_HOME: &str = "/var/tmp/dsinfra-admin-home";
const SSHD: &str = "/usr/sbin/sshd";
const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";

/// A set of running test hosts sharing one client key.
pub struct TestHosts {
    /// The hosts, `host0`, `host1`, ...
    pub hosts: Vec<Host>,
    /// The client's private key file.
    pub client_key: PathBuf,
    /// Owns every host's directory; removed after the hosts stop.
    dir: tempfile::TempDir,
}

/// A test host's stand-in for its InfiniBand interface: the loopback address its `ib0` has (the
/// step templates' test seam `DSINFRA_TEST_IB0_ADDRESS`, set for every session by sshd's
/// `SetEnv`), and whether its sshd also listens there. A host in the head's fabric listens on its
/// ib0 address; a host outside it does not, so nothing reaches it there, as on Azure, where only
/// VMs of one availability set share an InfiniBand fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ib0 {
    /// A loopback address (`127.77.0.1`) standing for the ib0 address.
    pub address: String,
    /// Whether the host's sshd listens on it (the host is in the fabric).
    pub listening: bool,
}

/// One running sshd.
pub struct Host {
    /// Its node name in tests (`host0`).
    pub name: String,
    /// The port it listens on at 127.0.0.1.
    pub port: u16,
    /// Its host key (what a pinned policy expects).
    pub public_key: HostKey,
    /// Its directory: config, keys, pid file, log, fake boot id, markers.
    pub dir: PathBuf,
    /// A file holding the host's "boot id": tests rewrite it to simulate a reboot.
    pub boot_id_path: PathBuf,
    /// Where step markers of this host go (all hosts share one filesystem).
    pub marker_dir: PathBuf,
    /// sshd's own log (`-E`).
    pub log: PathBuf,
    /// Its ib0 stand-in, if it has one.
    pub ib0: Option<Ib0>,
    pid_file: PathBuf,
    child: Child,
}

/// Starts `n` hosts. Returns `None` (after printing why) when this machine cannot run them
/// locally; under CI (`CI=true`) that is a test failure instead, so CI never skips silently.
pub fn start(n: usize) -> Option<TestHosts> {
    start_with_ib0(&vec![None; n])
}

/// Starts one host per entry of `ib0`, each with that ib0 stand-in (or none).
pub fn start_with_ib0(ib0: &[Option<Ib0>]) -> Option<TestHosts> {
    if !available() {
        return None;
    }
    let dir = scratch_dir();
    let (client_key, client_public) = write_client_key(dir.path());
    let authorized = dir.path().join("authorized_keys");
    write_file(
        &authorized,
        format!("{}\n", client_public.to_openssh()).as_bytes(),
        0o644,
    );
    let hosts = ib0
        .iter()
        .enumerate()
        .map(|(i, ib0)| Host::start(dir.path(), &format!("host{i}"), &authorized, ib0.as_ref()))
        .collect();
    Some(TestHosts {
        hosts,
        client_key,
        dir,
    })
}

/// Whether real sshd hosts can run here. When they cannot, a local run prints why and gets
/// `false`; under CI (`CI=true`) that is a test failure instead, so CI never skips silently.
pub fn available() -> bool {
    match prerequisites() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "real sshd test hosts are required under CI: {why}"
            );
            eprintln!("SKIPPED: cannot start sshd test hosts: {why} (scripts/test installs them)");
            false
        }
    }
}

/// A fresh directory for hosts, readable by the test user (it reads boot ids and markers).
pub fn scratch_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("dsinfra-sshd-")
        .tempdir()
        .expect("a temp dir can be created");
    set_mode(dir.path(), 0o755);
    dir
}

/// Generates a client key pair and writes its private half to `dir/client_ed25519` (0600);
/// returns that path and the public half.
pub fn write_client_key(dir: &Path) -> (PathBuf, HostKey) {
    let client = HostKeyPair::generate().expect("ed25519 generation works");
    let path = dir.join("client_ed25519");
    write_file(&path, client.private_openssh().expose().as_bytes(), 0o600);
    (path, client.public().clone())
}

/// Writes an `authorized_keys` file (0644) with one key per line.
pub fn write_authorized_keys(path: &Path, keys: &[String]) {
    let mut text = String::new();
    for key in keys {
        text.push_str(key.trim());
        text.push('\n');
    }
    write_file(path, text.as_bytes(), 0o644);
}

impl TestHosts {
    /// Authentication with this run's client key.
    pub fn auth(&self) -> Auth {
        Auth::key_file(&self.client_key).expect("the harness wrote a valid key")
    }

    /// The harness's scratch directory (logs of tests can go below it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Host {
    fn start(root: &Path, name: &str, authorized: &Path, ib0: Option<&Ib0>) -> Self {
        let pair = HostKeyPair::generate().expect("ed25519 generation works");
        Self::start_with_key_and_ib0(
            root,
            name,
            pair.private_openssh().expose(),
            pair.public(),
            &[authorized],
            ib0,
        )
    }

    /// Starts one host in `root/name` (created) whose only host key is `private_key` (OpenSSH
    /// PEM, whose public half is `public_key`), letting [`TEST_USER`] in with the keys in the
    /// `authorized` file. Stops when the value drops.
    pub fn start_with_key(
        root: &Path,
        name: &str,
        private_key: &str,
        public_key: &HostKey,
        authorized: &Path,
    ) -> Self {
        Self::start_with_key_and_ib0(root, name, private_key, public_key, &[authorized], None)
    }

    /// [`Host::start_with_key`] with an ib0 stand-in, letting in the keys of every file in
    /// `authorized` (a missing file lets in nobody).
    pub fn start_with_key_and_ib0(
        root: &Path,
        name: &str,
        private_key: &str,
        public_key: &HostKey,
        authorized: &[&Path],
        ib0: Option<&Ib0>,
    ) -> Self {
        Self::start_listening(
            root,
            name,
            (private_key, public_key),
            authorized,
            ib0,
            (None, None),
        )
    }

    /// [`Host::start_with_key_and_ib0`] that also listens on the loopback address `address`
    /// (same port), when given, on `port` when given and free (a machine started again keeps
    /// its address and port 22).
    pub fn start_with_key_ib0_at(
        root: &Path,
        name: &str,
        key: (&str, &HostKey),
        authorized: &[&Path],
        ib0: Option<&Ib0>,
        (address, port): (Option<&str>, Option<u16>),
    ) -> Self {
        Self::start_listening(root, name, key, authorized, ib0, (address, port))
    }

    /// [`Host::start_with_key`] that also listens on the loopback address `address` (same port):
    /// a node's own address, so that several hosts on one port-free machine are still told
    /// apart by address, as nodes on private IPs are.
    pub fn start_with_key_at(
        root: &Path,
        name: &str,
        (private_key, public_key): (&str, &HostKey),
        authorized: &Path,
        address: &str,
    ) -> Self {
        Self::start_listening(
            root,
            name,
            (private_key, public_key),
            &[authorized],
            None,
            (Some(address), None),
        )
    }

    fn start_listening(
        root: &Path,
        name: &str,
        (private_key, public_key): (&str, &HostKey),
        authorized: &[&Path],
        ib0: Option<&Ib0>,
        (also_listen, wanted_port): (Option<&str>, Option<u16>),
    ) -> Self {
        let dir = root.join(name);
        fs::create_dir(&dir).expect("host dir can be created");
        set_mode(&dir, 0o755);
        let key_file = dir.join("ssh_host_ed25519_key");
        write_file(&key_file, private_key.as_bytes(), 0o600);
        // The host's own temporary directory (its sessions get it as TMPDIR): the hosts are one
        // machine, and OpenMPI's daemons on two of them made the same session directory under a
        // shared /tmp at once, and one failed ("File exists"); real nodes each have their /tmp.
        let tmp = dir.join("tmp");
        fs::create_dir(&tmp).expect("host tmp dir can be created");
        set_mode(&tmp, 0o1777);
        let boot_id_path = dir.join("boot_id");
        write_file(
            &boot_id_path,
            format!("{}\n", new_boot_id()).as_bytes(),
            0o644,
        );
        let pid_file = dir.join("sshd.pid");
        let log = dir.join("sshd.log");
        let config = dir.join("sshd_config");

        let mut last_log = String::new();
        for attempt in 0..5 {
            let port = match wanted_port {
                Some(port) if attempt == 0 => port,
                _ => free_port(),
            };
            write_file(
                &config,
                sshd_config(
                    port,
                    (&key_file, &pid_file, &tmp),
                    authorized,
                    (ib0, also_listen),
                )
                .as_bytes(),
                0o644,
            );
            let _ = fs::remove_file(&pid_file);
            let child = Command::new(SSHD)
                .args(["-D", "-f"])
                .arg(&config)
                .arg("-E")
                .arg(&log)
                .stdin(Stdio::null())
                .spawn()
                .expect("sshd starts");
            let mut host = Self {
                name: name.to_owned(),
                port,
                public_key: public_key.clone(),
                marker_dir: dir.join("markers"),
                dir: dir.clone(),
                boot_id_path: boot_id_path.clone(),
                log: log.clone(),
                ib0: ib0.cloned(),
                pid_file: pid_file.clone(),
                child,
            };
            if host.wait_listening() {
                return host;
            }
            // Most likely another test took the port between our probe and sshd's bind.
            last_log = fs::read_to_string(&log).unwrap_or_default();
            host.stop();
        }
        panic!("sshd for {name} did not start; its log:\n{last_log}");
    }

    /// Waits until sshd wrote its pid file and accepts TCP connections.
    fn wait_listening(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if self.pid_file.exists()
                && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The address of this host for the SSH layer.
    pub fn target(&self) -> Target {
        Target {
            node: self.name.clone(),
            host: "127.0.0.1".to_owned(),
            port: self.port,
            user: TEST_USER.to_owned(),
        }
    }

    /// A policy pinning this host's real key.
    pub fn pinned(&self) -> HostKeyPolicy {
        HostKeyPolicy::Pinned(self.public_key.clone())
    }

    /// This host as a step-runner node, with its own marker dir and fake boot id.
    pub fn node(&self) -> NodeSpec {
        let mut node = NodeSpec::new(self.target(), self.pinned());
        node.marker_dir = self.marker_dir.display().to_string();
        node.boot_id_path = self.boot_id_path.display().to_string();
        node
    }

    /// A reboot command for the runner that "reboots" this host by giving it a new boot id.
    pub fn simulated_reboot_command(&self) -> String {
        format!(
            "sudo -n sh -c 'cat /proc/sys/kernel/random/uuid > {}'",
            self.boot_id_path.display()
        )
    }

    /// The current fake boot id.
    pub fn boot_id(&self) -> String {
        fs::read_to_string(&self.boot_id_path)
            .expect("boot id file exists")
            .trim()
            .to_owned()
    }

    /// Simulates a reboot from the test's side.
    pub fn reboot(&self) {
        write_file(
            &self.boot_id_path,
            format!("{}\n", new_boot_id()).as_bytes(),
            0o644,
        );
    }

    /// Stops the machine this host stands for at once, as an eviction does: every process its
    /// sshd started (sessions, their shells and jobs: the descendants of sshd's pid, and the
    /// processes carrying this host's TMPDIR, which detached jobs do) is killed with SIGKILL,
    /// then sshd itself.
    pub fn power_off(&mut self) {
        let root = fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .unwrap_or_else(|| self.child.id());
        // Parent of every process, from /proc/PID/stat (the field after the parenthesised name).
        let parents: Vec<(u32, u32)> = fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let after = stat.rsplit_once(')')?.1;
                let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
                Some((pid, ppid))
            })
            .collect();
        let mut tree = vec![root];
        let mut i = 0;
        while i < tree.len() {
            let parent = tree[i];
            tree.extend(
                parents
                    .iter()
                    .filter(|(_, pp)| *pp == parent)
                    .map(|(p, _)| *p),
            );
            i += 1;
        }
        // And what left the tree (a detached job: `setsid nohup` re-parents it to init), known
        // by the environment every session of this host has: its own TMPDIR.
        let marker = format!("TMPDIR={}", self.dir.join("tmp").display());
        for (pid, _) in &parents {
            let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            if !tree.contains(pid)
                && environ
                    .split(|b| *b == 0)
                    .any(|entry| entry == marker.as_bytes())
            {
                tree.push(*pid);
            }
        }
        for pid in tree.iter().skip(1) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        self.stop();
    }

    /// Stops sshd by the pid in its pid file (falling back to the child's pid), then reaps it.
    fn stop(&mut self) {
        let pid = fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .unwrap_or_else(|| self.child.id());
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
    }
}

fn sshd_config(
    port: u16,
    (key, pid, tmp): (&Path, &Path, &Path),
    authorized: &[&Path],
    (ib0, also_listen): (Option<&Ib0>, Option<&str>),
) -> String {
    // One SetEnv line: sshd keeps the first value it reads for a directive.
    let ib0 = match ib0 {
        Some(Ib0 { address, listening }) => format!(
            "{}SetEnv TMPDIR={tmp} DSINFRA_TEST_IB0_ADDRESS={address}\n",
            if *listening {
                format!("ListenAddress {address}\n")
            } else {
                String::new()
            },
            tmp = tmp.display(),
        ),
        None => format!("SetEnv TMPDIR={}\n", tmp.display()),
    };
    let also = also_listen.map_or_else(String::new, |a| format!("ListenAddress {a}\n"));
    format!(
        "Port {port}\n\
         ListenAddress 127.0.0.1\n\
         {ib0}\
         {also}\
         HostKey {key}\n\
         PidFile {pid}\n\
         AuthorizedKeysFile {authorized} %h/.ssh/authorized_keys\n\
         AllowUsers {TEST_USER} {ADMIN_USER}\n\
         PermitRootLogin no\n\
         UsePAM no\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PubkeyAuthentication yes\n\
         StrictModes no\n\
         KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n\
         MaxStartups 200:30:400\n\
         MaxSessions 50\n\
         LogLevel VERBOSE\n\
         AllowTcpForwarding yes\n\
         Subsystem sftp {SFTP_SERVER}\n",
        key = key.display(),
        pid = pid.display(),
        // sshd splits the list at spaces: the farm's scratch paths have none.
        authorized = authorized
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Checks (once per process) that sshd can run here and prepares the user, sudo and /run/sshd.
fn prerequisites() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY.get_or_init(prepare).clone()
}

fn prepare() -> Result<(), String> {
    for (path, package) in [
        (SSHD, "openssh-server"),
        (SFTP_SERVER, "openssh-sftp-server"),
        ("/usr/bin/sudo", "sudo"),
    ] {
        if !Path::new(path).exists() {
            return Err(format!("{path} is missing (Debian package {package})"));
        }
    }
    let uid = run("id", &["-u"])?;
    if uid.trim() != "0" {
        return Err("the harness must run as root to start sshd and create its test user".into());
    }
    fs::create_dir_all("/run/sshd").map_err(|e| format!("cannot create /run/sshd: {e}"))?;
    set_mode(Path::new("/run/sshd"), 0o755);
    for (user, home) in [(TEST_USER, TEST_HOME), (ADMIN_USER, ADMIN_HOME)] {
        create_user(user, home)?;
    }
    let sudoers = Path::new("/etc/sudoers.d/dsinfra-test");
    let rule =
        format!("{TEST_USER} ALL=(ALL) NOPASSWD: ALL\n{ADMIN_USER} ALL=(ALL) NOPASSWD: ALL\n");
    if fs::read_to_string(sudoers).ok().as_deref() != Some(rule.as_str()) {
        let staging = sudoers.with_extension("tmp");
        fs::write(&staging, &rule).map_err(|e| format!("cannot write sudoers rule: {e}"))?;
        set_mode(&staging, 0o440);
        fs::rename(&staging, sudoers).map_err(|e| format!("cannot install sudoers rule: {e}"))?;
    }
    Ok(())
}

/// Creates a login user (no password: keys only) with its home directory, unless it exists.
fn create_user(user: &str, home: &str) -> Result<(), String> {
    if run("id", &["-u", user]).is_err() {
        let created = run(
            "useradd",
            &["-M", "-p", "*", "-d", home, "-s", "/bin/bash", user],
        );
        // Another test binary may have created it at the same moment.
        if let Err(why) = created
            && run("id", &["-u", user]).is_err()
        {
            return Err(format!("cannot create user {user}: {why}"));
        }
    }
    fs::create_dir_all(home).map_err(|e| format!("cannot create {home}: {e}"))?;
    run("chown", &[user, home])?;
    Ok(())
}

/// [`ADMIN_USER`], held by one test at a time (a lock file, across test processes and
/// concurrent test runs), with an empty `~/.ssh`: the test's own VMs write the admin mesh there.
pub struct AdminUser {
    _lock: fs::File,
}

impl AdminUser {
    /// Waits for the user, then empties its `~/.ssh`. `None` when sshd hosts cannot run here.
    pub fn take() -> Option<Self> {
        if !available() {
            return None;
        }
        let lock = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open("/var/tmp/dsinfra-admin-user.lock")
            .expect("the admin user's lock file opens");
        lock.lock().expect("the admin user's lock is taken");
        let ssh = Path::new(ADMIN_HOME).join(".ssh");
        let _ = fs::remove_dir_all(&ssh);
        Some(Self { _lock: lock })
    }

    /// The user's `~/.ssh`.
    #[allow(clippy::unused_self)] // Only the holder of the user may look there.
    pub fn ssh_dir(&self) -> PathBuf {
        Path::new(ADMIN_HOME).join(".ssh")
    }
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port is available")
        .port()
}

fn new_boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/uuid")
        .expect("the kernel provides uuids")
        .trim()
        .to_owned()
}

fn write_file(path: &Path, contents: &[u8], mode: u32) {
    fs::write(path, contents).expect("harness files can be written");
    set_mode(path, mode);
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod works");
}
