//! Cluster step kinds: the SSH mesh and nodefile, BeeOND and Alluxio (elbencho is in `bench`).
//!
//! Each expands into several runner steps whose scopes put the runner's barriers where the
//! workflow needs them: an all-nodes install, then a head-only start that waits for every node
//! (a scope change is a barrier), then an all-nodes check that waits for the head.
//!
//! The SSH mesh needs the head's public key on every node, and the key must be generated on the
//! head (its private half never leaves it). The runner cannot pass one node's output to another
//! node's step, so the engine runs [`head_key_step`] on the head first (it is cheap and
//! idempotent), reads the key from its output with [`parse_head_key`], and renders the mesh with
//! it in [`NodeContext::head_public_key`](super::NodeContext).

use serde_json::{Value, json};

use super::params::check_path;
use super::{Builder, LibraryError, NodeContext, Part, secret_input, templates};
use crate::steps::spec::{RunPolicy, Scope, StepSpec};

/// The default BeeOND mount point.
pub(super) const BEEOND_MOUNT: &str = "/mnt/scratch";

/// The prefix of the line [`head_key_step`] prints before the head's public key.
pub const HEAD_KEY_PREFIX: &str = "dsinfra-head-key: ";

/// The step that makes sure the head has its cluster SSH key and prints the public half on a
/// line starting with [`HEAD_KEY_PREFIX`]. Head only, run every time (it only reads the key
/// once it exists), so the engine always gets the key before rendering the mesh.
pub fn head_key_step(ctx: &NodeContext) -> Result<StepSpec, LibraryError> {
    let name = "dsinfra-head-key".to_owned();
    let context = json!({
        "step": name,
        "kind": "head_key",
        "title": "the head's cluster SSH key",
        "experiment": ctx.experiment,
        "block": ctx.block,
        "node_count": ctx.nodes.len(),
        "temp_dir": ctx.temp_dir,
        "infiniband": ctx.infiniband,
        "ssh_dir": ctx.mesh.ssh_dir,
        "prefix": HEAD_KEY_PREFIX,
    });
    let script = templates::render("head_key.sh.j2", &context).map_err(|template| {
        LibraryError::Template {
            step: name.clone(),
            template,
        }
    })?;
    let mut step = StepSpec::new(name, script);
    step.scope = Scope::Head;
    step.policy = RunPolicy::Always;
    step.timeout = Some(std::time::Duration::from_mins(2));
    Ok(step)
}

/// The public key in a line printed by [`head_key_step`], if the line is one and the key is a
/// single well-formed OpenSSH ed25519 public key.
pub fn parse_head_key(line: &str) -> Option<String> {
    let key = line.trim().strip_prefix(HEAD_KEY_PREFIX.trim_end())?.trim();
    valid_public_key(key).then(|| key.to_owned())
}

fn valid_public_key(key: &str) -> bool {
    let mut parts = key.split(' ');
    parts.next() == Some("ssh-ed25519")
        && parts.next().is_some_and(|b64| {
            b64.len() >= 60
                && b64
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        })
        && key.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        && !key.contains(['\'', '"', '\\', '`', '$'])
}

/// The stand-in root of the `beeond` step kind ([`NodeContext::beeond_root`]) as the templates
/// use it: empty on Azure, so every path renders exactly as without the seam, else an absolute
/// path without a trailing `/`. It is rendered unquoted (in front of fixed paths, and inside the
/// mesh's remote commands), so only letters, digits and `/._-` are allowed.
pub(super) fn beeond_root(b: &Builder<'_>) -> Result<String, LibraryError> {
    let Some(root) = b.ctx().beeond_root.as_deref() else {
        return Ok(String::new());
    };
    let root = root.trim_end_matches('/');
    let plain = root.starts_with('/')
        && root.split('/').all(|c| c != "..")
        && root
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    if plain {
        Ok(root.to_owned())
    } else {
        Err(b.unsupported(format!(
            "the BeeOND root {root:?} must be an absolute path other than / of letters, digits \
             and `/._-` only, without `..`"
        )))
    }
}

/// Mesh variables shared by `ssh_mesh` and `beeond`.
fn mesh_vars(b: &Builder<'_>, nodefile: &str, prefer_ib: bool) -> Result<Value, LibraryError> {
    let ctx = b.ctx();
    let key = ctx.head_public_key.as_deref().ok_or_else(|| {
        b.unsupported(
            "the head's SSH public key is not known yet: run steps::library::head_key_step on \
             the head first and pass the key it prints in NodeContext::head_public_key",
        )
    })?;
    if !valid_public_key(key) {
        return Err(b.unsupported("the head's public key is not a single ssh-ed25519 key line"));
    }
    let mut nodes = Vec::new();
    for n in &ctx.nodes {
        let host_key = match ctx.host_keys.get(&n.name) {
            Some(line) => Some(known_hosts_key(line).ok_or_else(|| {
                b.unsupported(format!(
                    "the host key pinned for node {} is not an OpenSSH public key line",
                    n.name
                ))
            })?),
            None => None,
        };
        nodes.push(
            json!({"name": n.name, "ip": n.private_ip, "port": n.ssh_port,
            "host_key": host_key}),
        );
    }
    for n in &ctx.nodes {
        let ok = !n.private_ip.is_empty()
            && n.private_ip
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-'));
        if !ok {
            return Err(b.unsupported(format!(
                "node {} has no usable private IP ({:?})",
                n.name, n.private_ip
            )));
        }
    }
    let admin_dir = match ctx.mesh.admin_dir.as_deref() {
        None => String::new(),
        Some(dir) => check_path(dir)
            .map(|()| dir.trim_end_matches('/').to_owned())
            .map_err(|why| b.unsupported(format!("the admin user's mesh directory: {why}")))?,
    };
    if !valid_user_name(&ctx.admin_user) {
        return Err(b.unsupported(format!(
            "the admin user {:?} is not a Linux user name",
            ctx.admin_user
        )));
    }
    Ok(json!({
        "head_key": key,
        "admin_user": ctx.admin_user,
        "admin_dir": admin_dir,
        "nodes": nodes,
        "mesh_user": ctx.mesh.user,
        "ssh_dir": ctx.mesh.ssh_dir,
        "authorized_keys": ctx.mesh.authorized_keys,
        "nodefile": nodefile,
        "prefer_ib": prefer_ib,
        "root": beeond_root(b)?,
    }))
}

/// Whether `name` looks like a Linux user name (letters, digits, `_`, `-`, `.`, not starting with
/// `-`): a guard at rendering, where the admin user may come from an AML compute as well as from
/// a manifest. The manifest's own `admin_username` check (Azure's stricter rule) is in
/// `manifest::expand::compute::check_username`.
fn valid_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The `type base64` part of a pinned host key line (its comment dropped), for known_hosts; `None`
/// unless it is one well-formed key of a type OpenSSH host keys have.
fn known_hosts_key(line: &str) -> Option<String> {
    let mut parts = line.split_whitespace();
    let kind = parts.next()?;
    let data = parts.next()?;
    let known_type = matches!(
        kind,
        "ssh-ed25519"
            | "ssh-rsa"
            | "ecdsa-sha2-nistp256"
            | "ecdsa-sha2-nistp384"
            | "ecdsa-sha2-nistp521"
    );
    let base64 = data.len() >= 60
        && data
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
    (known_type && base64).then(|| format!("{kind} {data}"))
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Value::Object(a), Value::Object(b)) = (&mut a, b) {
        a.extend(b);
    }
    a
}

/// `ssh_mesh`: the head's key on every node, then the nodefile on the head.
pub(super) fn ssh_mesh(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let nodefile = p.path_or("nodefile", "/etc/dsinfra/nodefile")?;
    let prefer_ib = p.bool_or("prefer_infiniband", true)? && b.ctx().infiniband;
    let vars = mesh_vars(b, nodefile, prefer_ib)?;
    let policy = b.request().policy;
    b.push(Part::new(
        Some("keys"),
        "ssh_mesh-keys.sh.j2",
        "the head's SSH key on every node",
        Scope::All,
        policy,
        vars.clone(),
    ))?;
    b.push(Part::new(
        Some("nodefile"),
        "ssh_mesh-nodefile.sh.j2",
        "nodefile on the head",
        Scope::Head,
        policy,
        vars,
    ))
}

/// Variables of every BeeOND part.
fn beeond_vars(b: &Builder<'_>) -> Result<Value, LibraryError> {
    let p = b.params();
    let version = p.text_or("version", "7.4.6")?;
    if !version.starts_with("7.4.")
        || !version[4..].chars().all(|c| c.is_ascii_digit())
        || version.len() == 4
    {
        return Err(LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "version".into(),
            why: format!(
                "{version:?}: dsinfra supports BeeGFS 7.4.x (8.x dropped helperd and renamed \
                 the tools beeond relies on)"
            ),
        });
    }
    let interface = p
        .text("interface")?
        .unwrap_or(if b.ctx().infiniband { "ib0" } else { "eth0" });
    if interface.is_empty()
        || !interface
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err(LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "interface".into(),
            why: format!("{interface:?} is not a network interface name"),
        });
    }
    // The command is rendered as a shell word: `beeond` from the PATH, or the quoted override.
    let command = match b.ctx().beeond.as_deref() {
        None => "beeond".to_owned(),
        Some(path) if path.starts_with('/') => {
            check_path(path).map_err(|why| b.unsupported(format!("the beeond command: {why}")))?;
            templates::shell_word(path)
        }
        Some(path) => {
            return Err(b.unsupported(format!(
                "the beeond command {path:?} must be an absolute path"
            )));
        }
    };
    let root = beeond_root(b)?;
    Ok(json!({
        "root": root,
        "beeond": command,
        "version": version,
        "interface": interface,
        "mount": p.path_or("mount", BEEOND_MOUNT)?,
        "data_dir": p.path_or("data_dir", "{temp}/beeond")?,
        "conf_dir": format!("{root}/etc/beegfs/beeond"),
    }))
}

/// `beeond`: install everywhere, mesh, start on the head after every node is ready, then a
/// health gate on every node.
pub(super) fn beeond(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let vars = beeond_vars(b)?;
    let prefer_ib = vars["interface"] == "ib0";
    let nodefile = p.path_or("nodefile", "/etc/dsinfra/nodefile")?;
    let mesh = merge(vars.clone(), mesh_vars(b, nodefile, prefer_ib)?);
    let policy = b.request().policy;
    b.push(Part::new(
        Some("install"),
        "beeond-install.sh.j2",
        "BeeGFS/BeeOND install",
        Scope::All,
        RunPolicy::Once,
        vars.clone(),
    ))?;
    b.push(Part::new(
        Some("mesh"),
        "ssh_mesh-keys.sh.j2",
        "the head's SSH key on every node",
        Scope::All,
        RunPolicy::Once,
        mesh.clone(),
    ))?;
    b.push(Part::new(
        Some("start"),
        "beeond-start.sh.j2",
        "BeeOND start on the head",
        Scope::Head,
        policy,
        mesh,
    ))?;
    b.push(Part::new(
        Some("health"),
        "beeond-health.sh.j2",
        "BeeOND health gate",
        Scope::All,
        policy,
        vars,
    ))
}

/// The step that stops BeeOND on every node (run from the head on destroy and park).
pub fn beeond_stop(
    name: &str,
    params: &std::collections::BTreeMap<String, Value>,
    ctx: &NodeContext,
) -> Result<StepSpec, LibraryError> {
    let request = super::StepRequest {
        name,
        kind: "beeond",
        scope: Scope::Head,
        policy: RunPolicy::Always,
        params,
    };
    let mut b = Builder::new(&request, ctx)?;
    let nodefile = b
        .params()
        .path_or("nodefile", "/etc/dsinfra/nodefile")?
        .to_owned();
    let vars = merge(beeond_vars(&b)?, json!({ "nodefile": nodefile }));
    b.push(Part::new(
        Some("stop"),
        "beeond-stop.sh.j2",
        "BeeOND stop",
        Scope::Head,
        RunPolicy::Always,
        vars,
    ))?;
    let mut expansion = b.finish();
    Ok(expansion.steps.remove(0))
}

/// `alluxio`: install everywhere, master on the head, a worker and the FUSE mount everywhere.
pub(super) fn alluxio(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let target = b.storage("container")?;
    let credential = b.credential("container", None)?;
    if credential.kind != super::CredentialKind::AccountKey {
        return Err(b.unsupported("Alluxio's wasb under-store needs the storage account key"));
    }
    let version = p.text_or("version", "2.9.4")?;
    if !version.chars().all(|c| c.is_ascii_digit() || c == '.') || version.is_empty() {
        return Err(LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "version".into(),
            why: format!("{version:?} is not a version like 2.9.4"),
        });
    }
    let master = b
        .ctx()
        .nodes
        .first()
        .map(|n| n.private_ip.clone())
        .unwrap_or_default();
    let vars = json!({
        "version": version,
        "account": target.account,
        "container": target.name,
        "mount": p.path_or("mount", "/alluxio-fuse")?,
        "memory_gb": p.int_or("memory_gb", 10)?,
        "master": master,
    });
    let policy = b.request().policy;
    let mut install = Part::new(
        Some("install"),
        "alluxio-install.sh.j2",
        "Alluxio install and configuration",
        Scope::All,
        RunPolicy::Once,
        vars.clone(),
    );
    install.secrets.push(secret_input("storage", credential));
    b.push(install)?;
    b.push(Part::new(
        Some("master"),
        "alluxio-master.sh.j2",
        "Alluxio master on the head",
        Scope::Head,
        policy,
        vars.clone(),
    ))?;
    b.push(Part::new(
        Some("worker"),
        "alluxio-worker.sh.j2",
        "Alluxio worker and FUSE mount",
        Scope::All,
        policy,
        vars,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx3mYlq8zbV4f0v3Vq0m0Ck7cXG2xJH1p6JvUQ4WJ8y dsinfra-head";

    #[test]
    fn head_key_lines_are_parsed_strictly() {
        assert_eq!(
            parse_head_key(&format!("{HEAD_KEY_PREFIX}{KEY}")).as_deref(),
            Some(KEY)
        );
        assert_eq!(parse_head_key(KEY), None);
        assert_eq!(
            parse_head_key(&format!("{HEAD_KEY_PREFIX}ssh-rsa AAAA x")),
            None
        );
        assert_eq!(
            parse_head_key(&format!("{HEAD_KEY_PREFIX}{KEY}' ; rm -rf /")),
            None
        );
    }
}
