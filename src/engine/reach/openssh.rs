//! The system OpenSSH client pointed at the experiment's VMs (`dsinfra ssh`, `dsinfra ssh-config`):
//! which node a name means, how OpenSSH reaches it, the known_hosts file of pinned keys, and the
//! `ssh` command line and ssh_config text that make OpenSSH check exactly those keys.
//!
//! Everything is worked out from the state (which VMs exist, their pinned keys, users) and the
//! routes [`super::block_nodes`] computes from the IP addresses ARM reports. The pinned keys are
//! written to `.dsinfra/<manifest>/known_hosts`, one line per VM keyed by the VM's name, and
//! OpenSSH is told to use exactly that file with `HostKeyAlias` and `StrictHostKeyChecking yes`,
//! so the user's own `known_hosts` plays no part and a VM presenting any other key is refused.
//!
//! Nodes behind the head: the ssh_config says `ProxyJump <head alias>` (OpenSSH starts the jump
//! with the same `-F` file, so the head's own block applies to it). `dsinfra ssh` has no config
//! file, and options given with `-o` never reach a `-J` jump, so its command line spells the jump
//! out as a `ProxyCommand` running `ssh -W` to the head with the head's alias and options.
//!
//! Nothing here prints or runs a process: the CLI shows the [`Notice`]s and the text, and execs
//! the command line.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Endpoints, NodeReach, Route};
use crate::ssh::shell_quote;
use crate::state::State;

/// The known-hosts file's name in the state directory.
pub const KNOWN_HOSTS: &str = "known_hosts";

/// Why a node cannot be named, reached, or its known_hosts written.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// The state has no VMs at all.
    #[error("no node `{name}`: the state has no VMs (nothing applied yet?)")]
    NoVms {
        /// The name asked for.
        name: String,
    },
    /// No node has that name.
    #[error("no node `{name}` in the state (nodes: {nodes}){hint}")]
    NoSuchNode {
        /// The name asked for.
        name: String,
        /// Every node, comma-separated.
        nodes: String,
        /// `; did you mean ...?`, or how nodes are named.
        hint: String,
    },
    /// More than one node has that name.
    #[error("`{name}` names more than one node ({nodes}): give its address")]
    Ambiguous {
        /// The name asked for.
        name: String,
        /// The nodes it names, comma-separated.
        nodes: String,
    },
    /// The node has no route (parked, no endpoint, its head unreachable).
    #[error("node {node} ({vm}) cannot be reached: it {why}")]
    Unreachable {
        /// Its address.
        node: String,
        /// Its VM name.
        vm: String,
        /// Why, as a phrase after "it".
        why: String,
    },
    /// A file of the state directory could not be written (or a path resolved).
    #[error("{what}")]
    Io {
        /// What failed, with the path.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// `Io` with its message.
fn io(what: String) -> impl FnOnce(std::io::Error) -> SshError {
    move |source| SshError::Io { what, source }
}

/// How OpenSSH reaches one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The `Host` alias: `<experiment>-<short name>` (`cosmoflow-train-1`).
    pub alias: String,
    /// The node's address, for messages (`cluster.train[1]`).
    pub node: String,
    /// The name its key is filed under in known_hosts: the VM's Azure name.
    pub key_alias: String,
    /// What to dial (for a node behind the head: what the head dials).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Login user.
    pub user: String,
    /// The pinned key (OpenSSH public key line), if the state has one.
    pub pinned: Option<String>,
    /// The head to go through, for nodes without a public IP.
    pub jump: Option<Box<SshHost>>,
}

/// Where the files OpenSSH reads live, and who logs in with which key.
#[derive(Debug, Clone)]
pub struct Files {
    /// Absolute path of the known-hosts file.
    pub known_hosts: PathBuf,
    /// The private key to use, if given.
    pub identity: Option<PathBuf>,
}

/// Every node of the experiment, and where its files go: what both commands work from.
pub struct Reached {
    pub experiment: String,
    pub dir: PathBuf,
    pub nodes: Vec<NodeReach>,
}

/// A line for the user while the ssh_config is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A host has no pinned key, so OpenSSH will trust it on first use (a warning).
    Unpinned(String),
    /// A node is left out of the config, and why (a note).
    LeftOut(String),
}

/// The ssh_config text, and what to tell the user about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The config, one `Host` block per reachable node.
    pub text: String,
    /// Warnings and notes, in node order.
    pub notices: Vec<Notice>,
}

impl Reached {
    /// Every node of every `vm`/`cluster` block of `state`, routed by `endpoints`; the files go
    /// to `dir` (the state directory).
    pub fn new(state: &State, endpoints: &Endpoints, dir: PathBuf) -> Self {
        let nodes = super::blocks(state)
            .iter()
            .flat_map(|block| super::block_nodes(state, block, endpoints))
            .collect();
        Self {
            experiment: state.experiment.clone(),
            dir,
            nodes,
        }
    }

    /// How OpenSSH reaches the node `name` (an address, a short form, a VM name or an alias).
    ///
    /// # Errors
    ///
    /// No node or several have that name, or the node cannot be reached.
    pub fn host(&self, name: &str) -> Result<SshHost, SshError> {
        let node = find_node(&self.nodes, &self.experiment, name)?;
        ssh_host(&self.experiment, &self.nodes, node).map_err(|why| SshError::Unreachable {
            node: node.node().to_string(),
            vm: node.name.clone(),
            why,
        })
    }

    /// Writes `<state dir>/known_hosts` (atomically) and returns where the files are.
    ///
    /// # Errors
    ///
    /// The directory or the file could not be written, or a path resolved.
    pub fn write_known_hosts(&self, identity: Option<&Path>) -> Result<Files, SshError> {
        write_known_hosts(self, identity)
    }

    /// The ssh_config for every node: a `Host` block for each reachable one, a comment (and a
    /// [`Notice::LeftOut`]) for each other.
    pub fn config(&self, files: &Files) -> Config {
        let mut text = format!(
            "# dsinfra ssh-config for experiment {}: host keys pinned in {}\n",
            self.experiment,
            files.known_hosts.display()
        );
        let mut notices = Vec::new();
        for node in &self.nodes {
            text.push('\n');
            match ssh_host(&self.experiment, &self.nodes, node) {
                Ok(host) => {
                    if host.pinned.is_none() {
                        notices.push(Notice::Unpinned(unpinned_warning(&host)));
                    }
                    text.push_str(&config_block(&host, files));
                }
                Err(why) => {
                    let alias = alias(&self.experiment, node);
                    notices.push(Notice::LeftOut(format!(
                        "{} ({alias}) is left out: it {why}",
                        node.node()
                    )));
                    let _ = writeln!(text, "# {alias} ({}): not reachable: it {why}", node.node());
                }
            }
        }
        Config { text, notices }
    }
}

impl SshHost {
    /// Warnings for the hosts of this connection (the node, then its head) whose key is not
    /// pinned.
    pub fn unpinned_warnings(&self) -> Vec<String> {
        unpinned(self).into_iter().map(unpinned_warning).collect()
    }

    /// The `ssh` command line (without the program), then `command` if any.
    pub fn argv(&self, files: &Files, command: &[String]) -> Vec<String> {
        ssh_argv(self, files, command)
    }
}

/// A node's short name: the block label, with the index for cluster nodes (`train[1]`).
fn short_name(node: &NodeReach) -> String {
    match node.vm.index {
        Some(i) => format!("{}[{i}]", node.vm.name),
        None => node.vm.name.clone(),
    }
}

/// A node's `Host` alias in ssh-config: `<experiment>-<label>[-<index>]`.
fn alias(experiment: &str, node: &NodeReach) -> String {
    match node.vm.index {
        Some(i) => format!("{experiment}-{}-{i}", node.vm.name),
        None => format!("{experiment}-{}", node.vm.name),
    }
}

/// Every name `dsinfra ssh` accepts for a node.
fn names_of(experiment: &str, node: &NodeReach) -> Vec<String> {
    let mut names = vec![
        node.node().to_string(),
        node.vm.to_string(),
        short_name(node),
        node.name.clone(),
        alias(experiment, node),
    ];
    if node.vm.index.is_some() && node.is_head() {
        names.push(node.block.to_string());
        names.push(node.block.name.clone());
    }
    names
}

/// The node `name` refers to.
fn find_node<'a>(
    nodes: &'a [NodeReach],
    experiment: &str,
    name: &str,
) -> Result<&'a NodeReach, SshError> {
    let matching: Vec<&NodeReach> = nodes
        .iter()
        .filter(|n| names_of(experiment, n).iter().any(|m| m == name))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] if nodes.is_empty() => Err(SshError::NoVms {
            name: name.to_owned(),
        }),
        [] => {
            let all: Vec<String> = nodes.iter().map(|n| n.node().to_string()).collect();
            let candidates: Vec<String> =
                nodes.iter().flat_map(|n| names_of(experiment, n)).collect();
            let hint = crate::diag::did_you_mean(name, candidates.iter().map(String::as_str))
                .map_or_else(
                    || "; a node is named by its address, its short form such as `train[1]`, or its VM name".to_owned(),
                    |s| format!("; did you mean `{s}`?"),
                );
            Err(SshError::NoSuchNode {
                name: name.to_owned(),
                nodes: all.join(", "),
                hint,
            })
        }
        many => {
            let all: Vec<String> = many.iter().map(|n| n.node().to_string()).collect();
            Err(SshError::Ambiguous {
                name: name.to_owned(),
                nodes: all.join(", "),
            })
        }
    }
}

/// How OpenSSH reaches `node`, or why it cannot.
fn ssh_host(experiment: &str, nodes: &[NodeReach], node: &NodeReach) -> Result<SshHost, String> {
    let host = |host: &str, port: u16, jump| SshHost {
        alias: alias(experiment, node),
        node: node.node().to_string(),
        key_alias: node.name.clone(),
        host: host.to_owned(),
        port,
        user: node.user.clone(),
        pinned: node.host_key.clone(),
        jump,
    };
    match &node.route {
        Route::Direct { host: h, port } => Ok(host(h, *port, None)),
        Route::Unreachable { why } => Err(why.clone()),
        Route::ViaHead { host: h, port } => {
            let head = nodes
                .iter()
                .find(|n| n.block == node.block && n.is_head())
                .ok_or_else(|| {
                    "is reached through its head node, which is not in the state".to_owned()
                })?;
            let head = ssh_host(experiment, nodes, head).map_err(|why| {
                format!("is reached through its head {}, which {why}", head.node())
            })?;
            Ok(host(h, *port, Some(Box::new(head))))
        }
    }
}

/// The hosts of a connection (the node, then its head) whose key is not pinned.
fn unpinned(host: &SshHost) -> Vec<&SshHost> {
    std::iter::successors(Some(host), |h| h.jump.as_deref())
        .filter(|h| h.pinned.is_none())
        .collect()
}

/// Why OpenSSH will trust `host`'s key on first use.
fn unpinned_warning(host: &SshHost) -> String {
    // An AML node's key is made by the service; dsinfra pins it once it first reaches the node.
    let why = if host.node.starts_with(&format!("{}.", super::AML_CLUSTER)) {
        "an AML node dsinfra has not reached yet"
    } else {
        "an adopted VM"
    };
    format!(
        "{} ({}) has no pinned host key in the state ({why}): OpenSSH will trust the key it presents the first time (StrictHostKeyChecking accept-new) and refuse any other key after that",
        host.node, host.alias
    )
}

/// The known-hosts file: the pinned key of every node, filed under its VM name. Nodes without a
/// pinned key keep the line OpenSSH recorded for them (accept-new), if any, from `previous`.
fn known_hosts_text(nodes: &[NodeReach], previous: &str) -> String {
    let mut text = String::from(
        "# Written by dsinfra from the host keys pinned in the state; do not edit.\n\
         # Lines of VMs without a pinned key are what OpenSSH accepted the first time.\n",
    );
    for node in nodes {
        match &node.host_key {
            Some(key) => {
                let _ = writeln!(text, "{} {}", node.name, key.trim());
            }
            None => {
                for line in previous
                    .lines()
                    .filter(|l| l.split_whitespace().next() == Some(node.name.as_str()))
                {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    text
}

/// Write `<state dir>/known_hosts` (atomically) and return where the files are.
fn write_known_hosts(reached: &Reached, identity: Option<&Path>) -> Result<Files, SshError> {
    std::fs::create_dir_all(&reached.dir)
        .map_err(io(format!("could not create {}", reached.dir.display())))?;
    let dir = std::path::absolute(&reached.dir)
        .map_err(io(format!("could not resolve {}", reached.dir.display())))?;
    let path = dir.join(KNOWN_HOSTS);
    let previous = std::fs::read_to_string(&path).unwrap_or_default();
    let text = known_hosts_text(&reached.nodes, &previous);
    let staging = dir.join(format!("{KNOWN_HOSTS}.tmp-{}", std::process::id()));
    std::fs::write(&staging, text)
        .and_then(|()| std::fs::rename(&staging, &path))
        .map_err(io(format!("could not write {}", path.display())))?;
    let identity = identity
        .map(|p| std::path::absolute(p).map_err(io(format!("could not resolve {}", p.display()))))
        .transpose()?;
    Ok(Files {
        known_hosts: path,
        identity,
    })
}

/// A path as OpenSSH reads it in a configuration value: `%` escaped (it starts a token in
/// `UserKnownHostsFile`, `IdentityFile` and `ProxyCommand`).
fn ssh_path(path: &Path) -> String {
    path.display().to_string().replace('%', "%%")
}

/// A value in an ssh_config line or `-o` option: double-quoted when it contains whitespace.
fn config_value(value: &str) -> String {
    if value.chars().any(char::is_whitespace) || value.contains('"') {
        format!("\"{}\"", value.replace('"', "\\\""))
    } else {
        value.to_owned()
    }
}

/// A word for `sh -c`: as it is when it has no special characters, else single-quoted.
fn sh_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@=,+-%".contains(c));
    if plain {
        word.to_owned()
    } else {
        shell_quote(word)
    }
}

/// `StrictHostKeyChecking` for a host: `yes` with a pinned key, else OpenSSH's trust on first use.
fn strictness(host: &SshHost) -> &'static str {
    if host.pinned.is_some() {
        "yes"
    } else {
        "accept-new"
    }
}

/// The options every connection to `host` needs, as (keyword, value) pairs, values escaped
/// for OpenSSH's `%` tokens but not yet quoted ([`option_text`] does that).
fn host_options(host: &SshHost, files: &Files) -> Vec<(&'static str, String)> {
    let mut options = vec![
        ("HostKeyAlias", host.key_alias.clone()),
        ("UserKnownHostsFile", ssh_path(&files.known_hosts)),
        ("StrictHostKeyChecking", strictness(host).to_owned()),
    ];
    // `IdentityFile` rather than `-i`: OpenSSH checks a `-i` path before expanding `%%`, so a
    // path with `%` in it works only as an option.
    if let Some(identity) = &files.identity {
        options.push(("IdentityFile", ssh_path(identity)));
    }
    options
}

/// An option's value as written after its keyword: `ProxyCommand` takes the rest of the line as
/// it is, every other value is quoted when it has spaces.
fn option_text(key: &str, value: &str) -> String {
    if key == "ProxyCommand" {
        value.to_owned()
    } else {
        config_value(value)
    }
}

/// The command that carries a connection through `head`: `ssh` to the head with its own alias,
/// known hosts and key policy, forwarding stdin/stdout to the node (`-W`). OpenSSH expands `%`
/// tokens in the whole command before running it, so every `%` of the head's options is escaped
/// once more (the jump's own `ssh` expands them again).
fn proxy_command(head: &SshHost, files: &Files) -> String {
    let mut words = vec![
        "ssh".to_owned(),
        "-p".to_owned(),
        head.port.to_string(),
        "-l".to_owned(),
        sh_word(&head.user),
    ];
    for (key, value) in host_options(head, files) {
        let option = format!("{key}={}", option_text(key, &value)).replace('%', "%%");
        words.push("-o".to_owned());
        words.push(sh_word(&option));
    }
    words.push("-W".to_owned());
    words.push("'[%h]:%p'".to_owned());
    words.push(sh_word(&head.host));
    words.join(" ")
}

/// The `Host` block for `host`. A node behind the head jumps through the head's own block.
fn config_block(host: &SshHost, files: &Files) -> String {
    let mut text = format!("Host {}\n", host.alias);
    match &host.jump {
        Some(head) => {
            let _ = writeln!(
                text,
                "  # {}: no public IP; reached through the head {}",
                host.node, head.node
            );
        }
        None => {
            let _ = writeln!(text, "  # {}", host.node);
        }
    }
    let _ = writeln!(text, "  HostName {}", host.host);
    let _ = writeln!(text, "  Port {}", host.port);
    let _ = writeln!(text, "  User {}", config_value(&host.user));
    for (key, value) in host_options(host, files) {
        let _ = writeln!(text, "  {key} {}", option_text(key, &value));
    }
    if let Some(head) = &host.jump {
        let _ = writeln!(text, "  ProxyJump {}", head.alias);
    }
    text
}

/// The `ssh` command line (without the program) for `host`, then `command` if any.
fn ssh_argv(host: &SshHost, files: &Files, command: &[String]) -> Vec<String> {
    let mut argv = vec![
        "-p".to_owned(),
        host.port.to_string(),
        "-l".to_owned(),
        host.user.clone(),
    ];
    let mut options = host_options(host, files);
    if let Some(head) = &host.jump {
        options.push(("ProxyCommand", proxy_command(head, files)));
    }
    for (key, value) in options {
        argv.push("-o".to_owned());
        argv.push(format!("{key}={}", option_text(key, &value)));
    }
    argv.push(host.host.clone());
    argv.extend(command.iter().cloned());
    argv
}

#[cfg(test)]
mod tests;
