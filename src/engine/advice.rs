//! A failed resource, as the user sees it: ARM's code and message verbatim (with the request
//! id), plus what to do about it. Advice is decided here, from the error and the resource, by
//! pure functions, so every text is tested exactly.
//!
//! Quota errors name the VM family, the region, the vCPUs needed against the limit and usage,
//! and where to ask for more (Azure portal > Quotas). Capacity errors (SkuNotAvailable,
//! AllocationFailed and its zonal and over-constrained variants) suggest another zone, region or
//! size and name the manifest line of the block that asked for it. A namespace the subscription
//! is not registered for (MissingSubscriptionRegistration) gets the command that registers it.
//! A disk update Azure refuses because the disk's VM is allocated gets the park-first commands.

use std::fmt;

use crate::addr::Address;
use crate::azure::ArmError;
use crate::azure::quota_message::QuotaScope;
use crate::diag::{SourceMap, Span};
use crate::model::Resource;

use super::events::Operation;
use super::registration;

/// One resource's failure, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceError {
    /// The resource.
    pub address: Address,
    /// What was attempted.
    pub operation: Operation,
    /// The error, verbatim (ARM's `code: message (request id ...)`).
    pub message: String,
    /// ARM's error code, when ARM answered one.
    pub code: Option<String>,
    /// What to do, one sentence per entry.
    pub advice: Vec<String>,
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.operation, self.address, self.message)?;
        for advice in &self.advice {
            write!(f, "\n  = help: {advice}")?;
        }
        Ok(())
    }
}

/// Codes meaning Azure has no room for the VM where it was asked for.
const CAPACITY_CODES: [&str; 5] = [
    "SkuNotAvailable",
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
];

/// `file:line` of a span, when the source text is known; the file alone otherwise.
pub fn location(span: &Span, sources: Option<&SourceMap>) -> String {
    match sources.and_then(|s| s.line_col(&span.file, span.start)) {
        Some(lc) => format!("{}:{}", span.file.display(), lc.line),
        None => span.file.display().to_string(),
    }
}

/// Describe an ARM error of `operation` on `address`. `resource` (from the manifest, absent for
/// deletes of resources it no longer has) and `sources` locate the advice.
pub fn describe(
    error: &ArmError,
    address: &Address,
    operation: Operation,
    resource: Option<&Resource>,
    sources: Option<&SourceMap>,
) -> ResourceError {
    let code = error.code().map(str::to_owned);
    let mut advice = Vec::new();
    let block = address.block_address();
    let at = resource.and_then(|r| r.span.as_ref()).map_or_else(
        || block.to_string(),
        |span| format!("{block} at {}", location(span, sources)),
    );
    let attr = |name: &str| {
        resource
            .and_then(|r| r.attrs.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    if let Some(facts) = error.quota_facts() {
        let region = facts
            .location
            .clone()
            .or_else(|| attr("location"))
            .unwrap_or_else(|| "the region".to_owned());
        let what = match facts.scope {
            QuotaScope::Family => format!("the {} vCPU quota", facts.family),
            QuotaScope::TotalRegional => "the total regional vCPU quota".to_owned(),
            QuotaScope::LowPriority => "the Spot/low-priority vCPU quota".to_owned(),
        };
        let numbers = match (
            facts.additional_required,
            facts.current_limit,
            facts.current_usage,
        ) {
            (Some(needed), Some(limit), Some(usage)) => format!(
                ": {needed} more vCPUs are needed, {} available (limit {limit}, in use {usage})",
                limit.saturating_sub(usage)
            ),
            (Some(needed), _, _) => format!(": {needed} more vCPUs are needed"),
            _ => String::new(),
        };
        advice.push(format!("{what} in {region} is too small{numbers}"));
        let target = facts
            .new_limit_required
            .map(|n| format!(" to at least {n}"))
            .unwrap_or_default();
        advice.push(format!(
            "request more in the Azure portal > Quotas > Compute ({}, {region}){target}, or choose a size of another family in {at}",
            facts.family
        ));
    } else if code
        .as_deref()
        .is_some_and(|c| CAPACITY_CODES.iter().any(|k| k.eq_ignore_ascii_case(c)))
    {
        let size = attr("size").map_or_else(String::new, |s| format!("{s} "));
        let region = attr("location").unwrap_or_else(|| "this region".to_owned());
        let zone = attr("zone").map_or_else(String::new, |z| format!(" zone {z}"));
        advice.push(format!(
            "Azure has no capacity for {size}in {region}{zone} right now: try another zone, region or size (`zone`, `location` or `size` of {at}), or apply again later"
        ));
    } else if code.as_deref() == Some("MissingSubscriptionRegistration") {
        let namespace = error
            .message()
            .and_then(registration::namespace_in)
            .map(str::to_owned)
            .or_else(|| {
                resource.and_then(|r| registration::namespace_of(r.kind).map(str::to_owned))
            });
        if let Some(namespace) = namespace {
            advice.push(registration::help(&namespace));
        }
    } else if let Some(park) = park_first(error, operation, resource) {
        advice.push(park);
    } else if let Some(wait) = error.throttle_wait() {
        advice.push(format!(
            "Azure throttles {block} for {} s: run apply again after {} (UTC); what was created is adopted",
            wait.wait.as_secs(),
            wait.until.format("%H:%M:%S")
        ));
    } else if error.is_throttled() {
        advice.push(
            "ARM kept throttling after every retry: apply again in a few minutes, or with a lower --parallelism"
                .to_owned(),
        );
    } else if error.is_credential() || error.is_auth() {
        advice.push(
            "check your Azure login (`az login`, or the AZURE_* environment variables) and that it may write to this subscription"
                .to_owned(),
        );
    } else if error.is_timeout() || error.is_connect() {
        advice.push(
            "ARM did not answer in time: apply again; what was created is adopted, nothing is duplicated"
                .to_owned(),
        );
    }
    ResourceError {
        address: address.clone(),
        operation,
        message: error.to_string(),
        code,
        advice,
    }
}

/// The park-first advice for a disk update Azure refuses because the disk's VM is allocated.
/// The plan refuses this when the state knows the VM runs (plan::disk_sku); this is for a state
/// that did not (a saved plan, a VM started between the refresh and the PATCH).
fn park_first(
    error: &ArmError,
    operation: Operation,
    resource: Option<&Resource>,
) -> Option<String> {
    let disk = resource.filter(|r| r.kind == crate::model::ResourceKind::ManagedDisk)?;
    let refused = error.code() == Some("OperationNotAllowed")
        && operation == Operation::Update
        && error
            .message()
            .is_some_and(|m| m.to_ascii_lowercase().contains("deallocated"));
    if !refused {
        return None;
    }
    let manifest = disk
        .span
        .as_ref()
        .map_or_else(|| "FILE".to_owned(), |s| s.file.display().to_string());
    Some(format!(
        "Azure changes {} this way only while the VM it is attached to is deallocated: `dsinfra park {manifest} --only vm.NAME` (that VM), apply again, then `dsinfra unpark {manifest} --only vm.NAME`; the disk and its data are kept",
        disk.address.block_address()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::ErrorDetail;
    use crate::azure::error::{FailedState, RequestInfo};
    use crate::model::{Lifecycle, ResourceKind};
    use serde_json::json;
    use std::path::Path;
    use std::sync::Arc;

    fn request() -> RequestInfo {
        RequestInfo {
            method: "PUT".into(),
            path:
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu"
                    .into(),
            request_id: Some("req-1".into()),
            correlation_id: None,
        }
    }

    fn vm(sources: &mut SourceMap) -> Resource {
        let text = "experiment = \"x\"\n\nvm \"gpu\" {\n  size = \"Standard_NC4as_T4_v3\"\n}\n";
        let file: Arc<Path> = sources.add("exp.hcl", text);
        let start = text.find("vm \"gpu\"").expect("present");
        Resource {
            address: "vm.gpu.vm".parse().expect("valid"),
            kind: ResourceKind::VirtualMachine,
            name: "x-gpu".into(),
            parent: None,
            resource_group: "rg".into(),
            attrs: [
                ("size".to_owned(), json!("Standard_NC4as_T4_v3")),
                ("location".to_owned(), json!("eastus")),
                ("zone".to_owned(), json!("2")),
            ]
            .into_iter()
            .collect(),
            depends_on: std::collections::BTreeSet::new(),
            lifecycle: Lifecycle::default(),
            span: Some(Span::new(file, start, start + 8)),
            attr_spans: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn quota_errors_name_family_region_numbers_and_the_portal() {
        let mut sources = SourceMap::new();
        let resource = vm(&mut sources);
        let error = ArmError::api(
            409,
            ErrorDetail {
                code: "OperationNotAllowed".into(),
                message: "Operation could not be completed as it results in exceeding approved standardNCSv3Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 4, Current Usage: 0, Additional Required: 6, (Minimum) New Limit Required: 6.".into(),
                ..ErrorDetail::default()
            },
            request(),
        );
        let described = describe(
            &error,
            &resource.address,
            Operation::Create,
            Some(&resource),
            Some(&sources),
        );
        assert_eq!(described.code.as_deref(), Some("OperationNotAllowed"));
        assert!(
            described
                .message
                .starts_with("OperationNotAllowed: Operation could not be completed")
        );
        assert!(described.message.ends_with("(request id req-1)"));
        assert_eq!(
            described.advice,
            [
                "the standardNCSv3Family vCPU quota in eastus is too small: 6 more vCPUs are needed, 4 available (limit 4, in use 0)",
                "request more in the Azure portal > Quotas > Compute (standardNCSv3Family, eastus) to at least 6, or choose a size of another family in vm.gpu at exp.hcl:3",
            ]
        );
    }

    #[test]
    fn capacity_errors_suggest_another_zone_region_or_size_at_the_manifest_line() {
        let mut sources = SourceMap::new();
        let resource = vm(&mut sources);
        let error = ArmError::operation_failed(
            FailedState::Failed,
            ErrorDetail {
                code: "AllocationFailed".into(),
                message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.".into(),
                ..ErrorDetail::default()
            },
            request(),
        );
        let described = describe(
            &error,
            &resource.address,
            Operation::Create,
            Some(&resource),
            Some(&sources),
        );
        assert_eq!(
            described.to_string(),
            "create vm.gpu.vm: AllocationFailed: Allocation failed. We do not have sufficient capacity for the requested VM size in this region. (request id req-1)\n  = help: Azure has no capacity for Standard_NC4as_T4_v3 in eastus zone 2 right now: try another zone, region or size (`zone`, `location` or `size` of vm.gpu at exp.hcl:3), or apply again later"
        );
    }

    #[test]
    fn an_unregistered_namespace_gets_the_command_that_registers_it() {
        let error = ArmError::api(
            409,
            ErrorDetail {
                code: "MissingSubscriptionRegistration".into(),
                message: "The subscription is not registered to use namespace 'Microsoft.DevTestLab'. See https://aka.ms/rps-not-found for how to register subscriptions.".into(),
                ..ErrorDetail::default()
            },
            request(),
        );
        let address: Address = "vm.gpu.auto_shutdown".parse().expect("valid");
        let described = describe(&error, &address, Operation::Create, None, None);
        assert_eq!(
            described.advice,
            [registration::help("Microsoft.DevTestLab")]
        );
    }

    #[test]
    fn a_disk_update_refused_on_an_allocated_vm_says_to_park_it() {
        let mut sources = SourceMap::new();
        let mut disk = vm(&mut sources);
        disk.address = "disk.datasets".parse().expect("valid");
        disk.kind = ResourceKind::ManagedDisk;
        let error = ArmError::api(
            409,
            ErrorDetail {
                code: "OperationNotAllowed".into(),
                message: "Changes to the disk sku of 'x-datasets' can be made only when the disk is unattached or the managing virtual machine(s) are deallocated. The disk is attached to VM 'x-prep'.".into(),
                ..ErrorDetail::default()
            },
            request(),
        );
        let described = describe(
            &error,
            &disk.address,
            Operation::Update,
            Some(&disk),
            Some(&sources),
        );
        assert_eq!(
            described.advice,
            [
                "Azure changes disk.datasets this way only while the VM it is attached to is deallocated: `dsinfra park exp.hcl --only vm.NAME` (that VM), apply again, then `dsinfra unpark exp.hcl --only vm.NAME`; the disk and its data are kept"
            ]
        );
    }

    #[test]
    fn other_errors_are_shown_verbatim_without_invented_advice() {
        let error = ArmError::api(
            400,
            ErrorDetail {
                code: "InvalidParameter".into(),
                message: "The value of parameter imageReference.sku is invalid.".into(),
                ..ErrorDetail::default()
            },
            request(),
        );
        let address: Address = "vm.gpu.vm".parse().expect("valid");
        let described = describe(&error, &address, Operation::Update, None, None);
        assert_eq!(
            described.to_string(),
            "update vm.gpu.vm: InvalidParameter: The value of parameter imageReference.sku is invalid. (request id req-1)"
        );
    }
}
