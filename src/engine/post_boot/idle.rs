//! Idle auto-park (issue 18): the [`IdleWatch`] of a block with `park { idle }`, from the
//! manifest, the catalog and the state, for the watcher step the engine adds to the head after
//! the block's own steps.
//!
//! Test seams (docs/park.md): `DSINFRA_IDLE_TIME_SCALE` compresses the window and the sampling
//! interval (interval floored at 1 s), `DSINFRA_NVIDIA_SMI` names an `nvidia-smi` stand-in,
//! `DSINFRA_IDLE_DIR` moves the watcher's state directory, and `DSINFRA_RUNS_DIR` the run
//! records it reads (as `dsinfra run` writes them). Under an emulator the watcher asks the
//! emulator's IMDS stand-in for the head instead of 169.254.169.254.

use std::time::Duration;

use serde_json::Value;

use super::super::reach::{Endpoints, NodeReach};
use crate::addr::Address;
use crate::azure::api_version::api_version_for_path;
use crate::model::Desired;
use crate::state::State;
use crate::steps::library::{IDLE_STATE_DIR, IdleWatch};

/// Multiplies the window and the interval (tests: `0.02` makes `2m` a 2.4 s window).
pub const IDLE_TIME_SCALE_ENV: &str = "DSINFRA_IDLE_TIME_SCALE";
/// An `nvidia-smi` stand-in on the nodes (an absolute path).
pub const NVIDIA_SMI_ENV: &str = "DSINFRA_NVIDIA_SMI";
/// The watcher's state directory instead of `/var/lib/dsinfra/idle`.
pub const IDLE_DIR_ENV: &str = "DSINFRA_IDLE_DIR";

/// The sampling interval for a window: a tenth of it, between a second and a minute.
fn interval_of(window: Duration) -> Duration {
    (window / 10).clamp(Duration::from_secs(1), Duration::from_mins(1))
}

/// `window` and `interval` multiplied by `scale` (a positive float; anything else is 1), the
/// interval at least a second.
fn scaled(window: Duration, scale: Option<&str>) -> (Duration, Duration) {
    let factor = scale
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(1.0);
    let interval = interval_of(window).mul_f64(factor);
    (window.mul_f64(factor), interval.max(Duration::from_secs(1)))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The watch of `block` if it parks when idle (`None` otherwise), or why it cannot be built (a
/// VM without its ARM id in the state).
pub fn idle_watch(
    desired: &Desired,
    state: &State,
    block: &Address,
    nodes: &[NodeReach],
    endpoints: &Endpoints,
    arm_endpoint: &str,
) -> Result<Option<IdleWatch>, String> {
    let Some(window) = desired.park_idle_of(block) else {
        return Ok(None);
    };
    let ids: Vec<String> = nodes
        .iter()
        .map(|n| {
            state
                .resource(&n.vm)
                .and_then(|r| r.id.clone())
                .ok_or_else(|| format!("{} has no ARM id in the state: run apply again", n.vm))
        })
        .collect::<Result<_, _>>()?;
    let Some((head_id, others)) = ids.split_first() else {
        return Err(format!("{block} has no VMs in the state"));
    };
    let gpus = nodes
        .first()
        .and_then(|n| desired.resource(&n.vm))
        .and_then(|vm| vm.attrs.get("size").and_then(Value::as_str))
        .and_then(|size| desired.vm_size(size))
        .is_some_and(|s| s.gpus > 0.0);
    let mut watch = IdleWatch::new(window, gpus);
    (watch.window, watch.interval) = scaled(window, env(IDLE_TIME_SCALE_ENV).as_deref());
    let arm = arm_endpoint.trim_end_matches('/');
    arm.clone_into(&mut watch.arm_endpoint);
    if endpoints.is_emulated() {
        watch.imds_endpoint = format!("{arm}/_emulator/imds{head_id}");
    }
    api_version_for_path(head_id)
        .ok_or_else(|| format!("no Microsoft.Compute api-version for {head_id}"))?
        .clone_into(&mut watch.compute_api_version);
    watch.head_vm_id.clone_from(head_id);
    watch.other_vm_ids = others.to_vec();
    if let Some(runs) = env(crate::engine::op::run::RUNS_DIR_ENV) {
        watch.runs_dir = runs;
    }
    watch.state_dir = env(IDLE_DIR_ENV).unwrap_or_else(|| IDLE_STATE_DIR.to_owned());
    watch.nvidia_smi = env(NVIDIA_SMI_ENV);
    Ok(Some(watch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_scale_compresses_window_and_interval_with_a_1s_floor() {
        let mins = Duration::from_mins;
        assert_eq!(scaled(mins(45), None), (mins(45), mins(1)));
        assert_eq!(
            scaled(mins(10), Some("0.004")),
            (Duration::from_millis(2400), Duration::from_secs(1))
        );
        assert_eq!(
            scaled(mins(120), Some("0.5")),
            (mins(60), Duration::from_secs(30))
        );
        // Nonsense scales are ignored, never a zero window.
        for bad in ["0", "-1", "NaN", "fast"] {
            assert_eq!(scaled(mins(45), Some(bad)), (mins(45), mins(1)), "{bad}");
        }
    }
}
