//! Hand-built desired worlds for unit tests of the planner and the renderers (the manifest layer
//! builds the same shapes from HCL; the snapshot tests in tests/plan_snapshots.rs use that).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{Mode, PlanOptions};
use crate::addr::Address;
use crate::model::{
    Attrs, AzureSettings, Desired, Lifecycle, Resource, ResourceKind, RunPolicy, Step, StepScope,
};

/// Parse an address known to be valid.
pub(crate) fn addr(text: &str) -> Address {
    text.parse().expect("fixture addresses are valid")
}

fn attrs(value: &Value) -> Attrs {
    value
        .as_object()
        .expect("fixture attributes are objects")
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A resource in the experiment's resource group.
pub(crate) fn resource(
    address: &str,
    kind: ResourceKind,
    name: &str,
    deps: &[&str],
    attributes: &Value,
) -> Resource {
    Resource {
        address: addr(address),
        kind,
        name: name.to_owned(),
        parent: None,
        resource_group: "exp-rg".to_owned(),
        attrs: attrs(attributes),
        depends_on: deps.iter().map(|d| addr(d)).collect::<BTreeSet<_>>(),
        lifecycle: Lifecycle::default(),
        span: None,
        attr_spans: BTreeMap::new(),
    }
}

/// A GPU VM with its public IP and NIC, a network, and a storage account with one container.
pub(crate) fn dual() -> Desired {
    let mut resources = vec![
        resource(
            "resource_group.main",
            ResourceKind::ResourceGroup,
            "exp-rg",
            &[],
            &json!({"location": "eastus", "tags": {"dsinfra-experiment": "exp"}}),
        ),
        resource(
            "network.main.vnet",
            ResourceKind::VirtualNetwork,
            "exp-vnet",
            &["resource_group.main"],
            &json!({"location": "eastus", "address_space": ["10.0.0.0/16"]}),
        ),
        resource(
            "vm.gpu.pip",
            ResourceKind::PublicIp,
            "exp-gpu-pip",
            &["resource_group.main"],
            &json!({"location": "eastus", "sku": "Standard"}),
        ),
        resource(
            "vm.gpu.nic",
            ResourceKind::NetworkInterface,
            "exp-gpu-nic",
            &["network.main.vnet", "vm.gpu.pip"],
            &json!({"location": "eastus", "subnet": "network.main.vnet", "public_ip": "vm.gpu.pip"}),
        ),
        resource(
            "vm.gpu.vm",
            ResourceKind::VirtualMachine,
            "exp-gpu",
            &["vm.gpu.nic"],
            &json!({
                "location": "eastus",
                "size": "Standard_NC4as_T4_v3",
                "image": "microsoft-dsvm:ubuntu-hpc:2204:latest",
                "os_disk_size_gb": 128,
                "os_disk_sku": "Premium_LRS",
                "nic": "vm.gpu.nic",
                "tags": {"dsinfra-experiment": "exp", "owner": "ds"}
            }),
        ),
        resource(
            "storage_account.data.account",
            ResourceKind::StorageAccount,
            "expdata01",
            &["resource_group.main"],
            &json!({"location": "eastus", "sku": "Standard_LRS", "kind": "StorageV2"}),
        ),
        resource(
            "storage_account.data.container.raw",
            ResourceKind::BlobContainer,
            "raw",
            &["storage_account.data.account"],
            &json!({"public_access": "None"}),
        ),
    ];
    resources[6].parent = Some("expdata01".to_owned());
    resources.sort_by(|a, b| a.address.cmp(&b.address));
    Desired {
        experiment: "exp".to_owned(),
        azure: AzureSettings {
            subscription: None,
            location: "eastus".to_owned(),
            resource_group: "exp-rg".to_owned(),
            tags: std::collections::BTreeMap::new(),
            endpoint: None,
        },
        resources,
        steps: vec![Step {
            block: addr("vm.gpu"),
            name: "mount".to_owned(),
            kind: "blobfuse2".to_owned(),
            scope: StepScope::All,
            run: RunPolicy::PerBoot,
            params: std::collections::BTreeMap::new(),
            span: None,
        }],
        outputs: Vec::new(),
        manifest_hash: "0f".repeat(32),
        notes: Vec::new(),
        park_idle: std::collections::BTreeMap::new(),
        kube_objects: Vec::new(),
        catalog: crate::catalog::Catalog::shipped(),
    }
}

/// Replace one attribute of one resource.
pub(crate) fn set(desired: &mut Desired, address: &str, attribute: &str, value: Value) {
    let address = addr(address);
    let r = desired
        .resources
        .iter_mut()
        .find(|r| r.address == address)
        .expect("fixture resource exists");
    r.attrs.insert(attribute.to_owned(), value);
}

/// A fixed time, so plans are deterministic.
pub(crate) fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-22T06:00:00Z")
        .expect("valid time")
        .with_timezone(&Utc)
}

/// Options for a normal plan of everything.
pub(crate) fn normal() -> PlanOptions {
    PlanOptions {
        mode: Mode::Normal,
        targets: Vec::new(),
        now: now(),
        rerun_steps: std::collections::BTreeSet::new(),
    }
}
