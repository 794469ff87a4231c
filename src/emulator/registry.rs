//! Resource providers as ARM's Providers API shows them, and the subscription's registration
//! with each: one provider per namespace the emulator serves, listing the resource types it
//! really implements (the [`Kind`] table and the provider-level endpoints `providers.rs` routes),
//! the api-versions it is held to and the configured locations.
//!
//! A namespace named in [`EmulatorConfig::unregistered`](super::EmulatorConfig) starts
//! `NotRegistered`; every request to it then answers ARM's 409 `MissingSubscriptionRegistration`
//! until `POST .../providers/{namespace}/register`. As in ARM, that answer says `Registering` and
//! the namespace becomes `Registered` a while later (a minute, scaled by the latency scale);
//! requests keep failing until then. `unregister` is the same in reverse. What differs from the
//! configured start is kept in the cloud's state, so it survives a restart.

use std::time::Duration;

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::paging;
use super::store::{Cloud, Kind, Registration, RegistrationState, top_level};

/// How long ARM takes to (un)register a namespace, before the latency scale: "a minute or two"
/// in Azure's documentation; the short end keeps the emulator's default run brisk.
const REGISTRATION_TIME: Duration = Duration::from_mins(1);

/// ARM's own namespace: always registered, whatever is asked.
const RESOURCES: &str = "Microsoft.Resources";

/// Registered in every subscription, like Microsoft.Resources: ARM needs it to authorize.
const AUTHORIZATION: &str = "Microsoft.Authorization";

/// One namespace the emulator serves.
struct Namespace {
    /// The canonical spelling ARM answers with.
    name: &'static str,
    /// Provider-level endpoints `providers.rs` routes, as ARM names their resource types, with
    /// the api-version the emulator is held to and whether the type is per location.
    endpoints: &'static [(&'static str, &'static str, bool)],
}

const NAMESPACES: &[Namespace] = &[
    Namespace {
        name: AUTHORIZATION,
        endpoints: &[
            ("roleAssignments", "2022-04-01", false),
            ("roleDefinitions", "2022-04-01", false),
        ],
    },
    Namespace {
        name: "Microsoft.Compute",
        endpoints: &[
            ("locations/operations", "2024-11-01", true),
            ("locations/operationResults", "2024-11-01", true),
            ("locations/usages", "2024-11-01", true),
            ("locations/vmSizes", "2024-11-01", true),
            ("skus", "2021-07-01", false),
        ],
    },
    Namespace {
        name: "Microsoft.ContainerRegistry",
        endpoints: &[
            ("locations/operations", "2023-07-01", true),
            ("locations/operationResults", "2023-07-01", true),
        ],
    },
    Namespace {
        name: "Microsoft.ContainerService",
        endpoints: &[
            ("locations/operations", "2025-10-01", true),
            ("locations/operationResults", "2025-10-01", true),
            ("locations/kubernetesVersions", "2025-10-01", true),
        ],
    },
    Namespace {
        name: "Microsoft.DevTestLab",
        endpoints: &[],
    },
    Namespace {
        name: "Microsoft.Insights",
        endpoints: &[],
    },
    Namespace {
        name: "Microsoft.KeyVault",
        endpoints: &[],
    },
    Namespace {
        name: "Microsoft.MachineLearningServices",
        endpoints: &[
            ("locations/operations", "2024-10-01", true),
            ("locations/operationResults", "2024-10-01", true),
            ("locations/usages", "2024-10-01", true),
            ("locations/vmSizes", "2024-10-01", true),
        ],
    },
    Namespace {
        name: "Microsoft.Network",
        endpoints: &[
            ("locations/operations", "2024-07-01", true),
            ("locations/operationResults", "2024-07-01", true),
        ],
    },
    Namespace {
        name: "Microsoft.OperationalInsights",
        endpoints: &[],
    },
    Namespace {
        name: RESOURCES,
        endpoints: &[("resources", "2025-04-01", false)],
    },
    Namespace {
        name: "Microsoft.Storage",
        endpoints: &[("checkNameAvailability", "2025-01-01", false)],
    },
];

/// The api-version of the spec each kind's answers are validated against (the emulator itself
/// accepts any version, so these are the versions it is known to speak correctly).
fn api_version(kind: Kind) -> &'static str {
    match kind {
        Kind::ResourceGroup => "2025-04-01",
        Kind::VirtualNetwork
        | Kind::Subnet
        | Kind::NetworkSecurityGroup
        | Kind::SecurityRule
        | Kind::PublicIpAddress
        | Kind::NetworkInterface => "2024-07-01",
        Kind::ProximityPlacementGroup | Kind::AvailabilitySet | Kind::VirtualMachine => {
            "2024-11-01"
        }
        Kind::Disk => "2025-01-02",
        Kind::StorageAccount | Kind::BlobContainer | Kind::FileShare => "2025-01-01",
        Kind::Schedule => "2018-09-15",
        Kind::KeyVault | Kind::ContainerRegistry => "2023-07-01",
        Kind::LogAnalyticsWorkspace => "2022-10-01",
        Kind::AppInsights => "2020-02-02",
        Kind::MlWorkspace | Kind::MlCompute => "2024-10-01",
        Kind::ManagedCluster | Kind::AgentPool => "2025-10-01",
    }
}

fn find(namespace: &str) -> Option<&'static Namespace> {
    NAMESPACES
        .iter()
        .find(|n| n.name.eq_ignore_ascii_case(namespace))
}

/// The canonical spelling of a namespace the emulator serves, `None` for any other: requests to
/// those are not implemented (see docs/emulator.md).
pub(crate) fn implemented(namespace: &str) -> Option<&'static str> {
    find(namespace).map(|n| n.name)
}

fn registration_key(sub: &str, namespace: &str) -> String {
    format!("{sub}/{namespace}").to_ascii_lowercase()
}

/// The subscription's registration with `namespace` at `now`.
fn state(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str, namespace: &str) -> RegistrationState {
    if namespace.eq_ignore_ascii_case(RESOURCES) || namespace.eq_ignore_ascii_case(AUTHORIZATION) {
        return RegistrationState::Registered;
    }
    match cloud.registrations.get(&registration_key(sub, namespace)) {
        Some(r) if r.until.is_none_or(|until| until <= ctx.now) => r.state.settled(),
        Some(r) => r.state,
        None if ctx
            .config
            .unregistered
            .iter()
            .any(|u| u.eq_ignore_ascii_case(namespace)) =>
        {
            RegistrationState::NotRegistered
        }
        None => RegistrationState::Registered,
    }
}

/// ARM's check before a request reaches a provider: the subscription must be registered for
/// the namespace. Namespaces the emulator does not serve pass (they are answered as not
/// implemented).
pub(crate) fn require_registered(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    namespace: &str,
) -> Result<(), ArmError> {
    match implemented(namespace) {
        Some(name) if state(cloud, ctx, sub, name) != RegistrationState::Registered => {
            Err(ArmError::missing_registration(name))
        }
        _ => Ok(()),
    }
}

/// The resource types of a namespace, as `ProviderResourceType`s.
fn resource_types(ctx: &Ctx<'_>, namespace: &Namespace) -> Vec<Value> {
    let aliases = ctx
        .query("$expand")
        .is_some_and(|e| e.to_ascii_lowercase().contains("resourcetypes/aliases"));
    let locations = &ctx.config.locations;
    let kinds = Kind::ALL
        .into_iter()
        .filter(|k| namespace_of(*k) == namespace.name)
        .map(|k| {
            let rtype = k.type_name().split_once('/').map_or("", |(_, t)| t);
            // Top-level resources carry tags and a location of their own; children do not.
            let capabilities = if top_level(k) || k == Kind::ResourceGroup {
                "SupportsTags, SupportsLocation"
            } else {
                "None"
            };
            (canonical_type(k, rtype), api_version(k), true, capabilities)
        });
    let endpoints = namespace
        .endpoints
        .iter()
        .map(|(t, v, per_location)| ((*t).to_owned(), *v, *per_location, "None"));
    kinds
        .chain(endpoints)
        .map(|(rtype, version, per_location, capabilities)| {
            let mut item = json!({
                "resourceType": rtype,
                "locations": if per_location { json!(locations) } else { json!([]) },
                "apiVersions": [version],
                "defaultApiVersion": version,
                "capabilities": capabilities,
            });
            if aliases {
                // The emulator knows no Azure Policy aliases; asked for them, it says so by an
                // empty list rather than by leaving the field out.
                item["aliases"] = json!([]);
            }
            item
        })
        .collect()
}

/// The namespace a kind belongs to, in its canonical spelling (DevTestLab answers its types in
/// lower case, but its namespace is `Microsoft.DevTestLab`).
fn namespace_of(kind: Kind) -> &'static str {
    implemented(kind.namespace()).unwrap_or(RESOURCES)
}

/// A type name as the provider lists it: camel case even where the resource answers in lower
/// case (DevTestLab).
fn canonical_type(kind: Kind, rtype: &str) -> String {
    match kind {
        Kind::Schedule => "schedules".to_owned(),
        _ => rtype.to_owned(),
    }
}

/// One `Provider` body.
fn provider(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str, namespace: &Namespace) -> Value {
    provider_in(ctx, sub, namespace, state(cloud, ctx, sub, namespace.name))
}

fn provider_in(ctx: &Ctx<'_>, sub: &str, namespace: &Namespace, state: RegistrationState) -> Value {
    json!({
        "id": format!("/subscriptions/{sub}/providers/{}", namespace.name),
        "namespace": namespace.name,
        "registrationState": state.as_str(),
        "registrationPolicy": if namespace.name == RESOURCES || namespace.name == AUTHORIZATION { "RegistrationFree" } else { "RegistrationRequired" },
        "resourceTypes": resource_types(ctx, namespace),
    })
}

/// `GET /subscriptions/{s}/providers`: every provider the emulator serves, registered or not,
/// paged like every list.
pub(crate) fn list(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let items = NAMESPACES
        .iter()
        .map(|n| provider(cloud, ctx, sub, n))
        .collect();
    paging::page(ctx, items)
}

/// `/subscriptions/{s}/providers/{namespace}[/{action}]`: the provider (GET), its resource
/// types (GET `resourceTypes`), `register` and `unregister` (POST).
pub(crate) fn handle(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    namespace: &str,
    action: Option<&str>,
) -> Result<Reply, ArmError> {
    let Some(found) = find(namespace) else {
        return Err(ArmError::not_implemented(&ctx.method, ctx.uri.path()));
    };
    let action = action.map(str::to_ascii_lowercase);
    let (method, transition) = match action.as_deref() {
        None | Some("resourcetypes") => ("GET", None),
        Some("register") => ("POST", Some(RegistrationState::Registering)),
        Some("unregister") => ("POST", Some(RegistrationState::Unregistering)),
        Some(_) => return Err(ArmError::not_implemented(&ctx.method, ctx.uri.path())),
    };
    if ctx.method != method {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    if action.as_deref() == Some("resourcetypes") {
        return Ok(Reply::json(
            200,
            json!({"value": resource_types(ctx, found)}),
        ));
    }
    let Some(transition) = transition else {
        return Ok(Reply::json(200, provider(cloud, ctx, sub, found)));
    };
    let now = state(cloud, ctx, sub, found.name);
    // Registering what is registered (or unregistering what is not) changes nothing; ARM's own
    // namespace cannot be unregistered.
    let already = match transition {
        RegistrationState::Registering => RegistrationState::Registered,
        _ => RegistrationState::NotRegistered,
    };
    if now == already || now == transition || found.name == RESOURCES || found.name == AUTHORIZATION
    {
        return Ok(Reply::json(200, provider_in(ctx, sub, found, now)));
    }
    let until = ctx.now
        + chrono::Duration::from_std(ctx.config.scaled(REGISTRATION_TIME))
            .unwrap_or_else(|_| chrono::Duration::zero());
    cloud.registrations.insert(
        registration_key(sub, found.name),
        Registration {
            state: transition,
            until: Some(until),
        },
    );
    Ok(Reply::json(200, provider_in(ctx, sub, found, transition)))
}
