//! `dsinfra emulator`: run the ARM emulator as a server until Ctrl-C, for CI pipelines and for
//! pointing several commands (`--endpoint`) at one emulated cloud.

use std::io::Write as _;

use anyhow::Context as _;

use super::{Outcome, Output};
use crate::args::EmulatorArgs;
use crate::connect::builtin_emulator_config;
use crate::emulator;

/// `dsinfra emulator`
pub async fn emulator(
    args: &EmulatorArgs,
    out: &Output,
    mut cancel: crate::engine::op::Cancel,
) -> anyhow::Result<Outcome> {
    if !(args.latency_scale.is_finite() && args.latency_scale >= 0.0) {
        anyhow::bail!(
            "--latency-scale {} is not a non-negative number (1 is near reality, 0.01 suits tests, 0 is instant)",
            args.latency_scale
        );
    }
    let state_dir = if args.in_memory {
        None
    } else {
        std::fs::create_dir_all(&args.state_dir)
            .with_context(|| format!("could not create {}", args.state_dir.display()))?;
        Some(args.state_dir.as_path())
    };
    let mut config = builtin_emulator_config(state_dir, args.latency_scale);
    config.port = args.port;
    config.required_token.clone_from(&args.token);
    config.faults_file.clone_from(&args.faults);
    config.throttle = !args.no_throttle;
    if let Some(vcpus) = args.vcpu_quota {
        config.quotas.default_family_limit = vcpus;
        config.quotas.regional_limit = vcpus;
    }
    config.page_size = args.page_size;
    config.unregistered.clone_from(&args.unregistered);
    config.features.clone_from(&args.feature);
    if args.trusted_launch_default {
        config
            .features
            .push(emulator::TRUSTED_LAUNCH_BY_DEFAULT.to_owned());
    }
    if let Some(url) = &args.azurite {
        let accounts = std::env::var("AZURITE_ACCOUNTS").unwrap_or_default();
        config.blob_data_plane = Some(
            emulator::BlobDataPlane::from_azurite_accounts(url, &accounts)
                .map_err(|e| anyhow::anyhow!("--azurite: {e}"))?,
        );
    }
    if let Some(dir) = &args.kube_schemas {
        let schemas = crate::kubeschema::Schemas::load(dir)
            .map_err(|e| anyhow::anyhow!("--kube-schemas: {e}"))?;
        config.kube_schemas = Some(std::sync::Arc::new(schemas));
    }
    let handle = emulator::start(config)
        .await
        .context("could not start the emulator")?;
    // The endpoint goes to stdout alone on its line so scripts can read it; the rest is for
    // people and goes to stderr.
    out.result(&format!("{}\n", handle.endpoint()));
    let _ = std::io::stdout().flush();
    out.note(&format!(
            "ARM emulator listening; cloud kept {}; latency x{}; Ctrl-C stops it. Use it with `dsinfra apply FILE --endpoint {}`",
            state_dir.map_or_else(
                || "in memory only".to_owned(),
                |d| format!("in {}", d.display())
            ),
            args.latency_scale,
            handle.endpoint()
        ));
    cancel.pressed().await;
    handle.shutdown().await;
    out.note("emulator stopped; its cloud is saved");
    Ok(Outcome::Success)
}
