//! Kernel-module steps (`mofed`, `beeond`: see [`crate::model::KERNEL_MODULE_STEPS`]) refuse to
//! start on a block whose VMs have Secure Boot on in Azure's view of them.
//!
//! Secure Boot loads only signed kernel modules, and these steps build theirs on the node: the
//! build would succeed and `modprobe` fail half an hour later with "Key was rejected by service".
//! dsinfra creates such blocks with Secure Boot off (manifest::expand::security), but a VM can
//! still have it on: `secure_boot = true` in the manifest, a VM created by an older dsinfra
//! (Azure applied Trusted Launch by default), or one changed in the portal. The check uses what
//! ARM reports ([`Endpoints::secure_boot`]), not the manifest, so all three are caught.

use crate::addr::Address;
use crate::engine::reach::{Endpoints, NodeReach};
use crate::model::Step;

/// Why the block's steps must not start, or `None` when they may.
pub(super) fn refusal(
    block: &Address,
    steps: &[&Step],
    nodes: &[NodeReach],
    endpoints: &Endpoints,
) -> Option<String> {
    let mut kinds: Vec<&str> = steps
        .iter()
        .filter(|s| s.builds_kernel_modules())
        .map(|s| s.kind.as_str())
        .collect();
    kinds.dedup();
    if kinds.is_empty() {
        return None;
    }
    // AML nodes are left out: they are not VMs in the subscription (the service runs them in
    // its own), so ARM has no securityProfile to read for them, and the node image the service
    // chooses is not something a manifest or `az vm update` can change.
    let on: Vec<String> = nodes
        .iter()
        .filter(|n| n.aml_compute().is_none())
        .filter(|n| endpoints.secure_boot(&n.vm) == Some(true))
        .map(|n| n.node().to_string())
        .collect();
    if on.is_empty() {
        return None;
    }
    let (steps, verb) = match kinds.as_slice() {
        [one] => (format!("step \"{one}\""), "builds"),
        many => (
            format!(
                "steps {}",
                many.iter()
                    .map(|k| format!("\"{k}\""))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            "build",
        ),
    };
    Some(format!(
        "{block}: not starting its {steps}: Secure Boot is on for {} (as Azure reports the VM), and the {steps} {verb} kernel modules that Secure Boot refuses to load. \
         Fix: remove `secure_boot = true` from {block} if the manifest has it (dsinfra then creates its VMs with Trusted Launch and Secure Boot off); \
         a VM that exists keeps its setting: deallocate it and run `az vm update --enable-secure-boot false` (or delete it), then apply again",
        on.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::engine::reach::Route;
    use crate::model::{Attrs, RunPolicy, StepScope};

    fn step(kind: &str) -> Step {
        Step {
            block: Address::block("cluster", "train"),
            name: kind.to_owned(),
            kind: kind.to_owned(),
            scope: StepScope::All,
            run: RunPolicy::Once,
            params: BTreeMap::new(),
            span: None,
        }
    }

    fn node(i: u32) -> NodeReach {
        NodeReach {
            vm: Address::new("cluster", "train", Some(i), "vm"),
            block: Address::block("cluster", "train"),
            index: i as usize,
            name: format!("exp-train-{i}"),
            user: "azureuser".to_owned(),
            public_ip: None,
            private_ip: None,
            host_key: None,
            route: Route::Direct {
                host: "127.0.0.1".to_owned(),
                port: 22,
            },
        }
    }

    fn arm_view(secure_boot: &[bool]) -> Endpoints {
        let addresses: BTreeMap<Address, Attrs> = secure_boot
            .iter()
            .enumerate()
            .map(|(i, on)| {
                let mut attrs = Attrs::new();
                attrs.insert("secure_boot".into(), json!(on));
                (
                    Address::new(
                        "cluster",
                        "train",
                        Some(u32::try_from(i).expect("small")),
                        "vm",
                    ),
                    attrs,
                )
            })
            .collect();
        Endpoints::direct().with_addresses(addresses)
    }

    /// Issue 13 item 13: mofed and beeond started on Secure Boot VMs and failed at modprobe.
    #[test]
    fn kernel_module_steps_refuse_when_azure_says_secure_boot_is_on() {
        let block = Address::block("cluster", "train");
        let (mofed, beeond, mesh) = (step("mofed"), step("beeond"), step("ssh_mesh"));
        let nodes = [node(0), node(1)];
        let why = refusal(
            &block,
            &[&mesh, &mofed, &beeond],
            &nodes,
            &arm_view(&[false, true]),
        )
        .expect("refused");
        assert_eq!(
            why,
            "cluster.train: not starting its steps \"mofed\" and \"beeond\": Secure Boot is on for cluster.train[1] (as Azure reports the VM), and the steps \"mofed\" and \"beeond\" build kernel modules that Secure Boot refuses to load. \
             Fix: remove `secure_boot = true` from cluster.train if the manifest has it (dsinfra then creates its VMs with Trusted Launch and Secure Boot off); \
             a VM that exists keeps its setting: deallocate it and run `az vm update --enable-secure-boot false` (or delete it), then apply again"
        );
        // Off everywhere, not read, or no kernel-module step: the steps run.
        assert_eq!(
            refusal(&block, &[&mofed], &nodes, &arm_view(&[false, false])),
            None
        );
        assert_eq!(
            refusal(&block, &[&mofed], &nodes, &Endpoints::direct()),
            None
        );
        assert_eq!(
            refusal(&block, &[&mesh], &nodes, &arm_view(&[true, true])),
            None
        );
        assert!(
            refusal(&block, &[&beeond], &nodes, &arm_view(&[true, true]))
                .expect("refused")
                .starts_with("cluster.train: not starting its step \"beeond\": Secure Boot is on for cluster.train[0], cluster.train[1] ")
        );
    }
}
