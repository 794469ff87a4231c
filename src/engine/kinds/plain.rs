//! The generic driver of plain ARM kinds: a body, the attributes read back, and nothing before
//! or after their requests. Each plain kind is one row (a `static`) saying where ARM's body has
//! each compared attribute, instead of a branch in every phase.

use serde_json::Value;

use super::{Driver, text};
use crate::azure::types::resources::ResourceGroup;
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::model::Attrs;

/// Where ARM's body has an attribute, and how it reads in dsinfra's form.
pub(crate) enum Read {
    /// Text at a JSON pointer.
    Text(&'static str),
    /// A whole number at a JSON pointer.
    Int(&'static str),
    /// A flag at a JSON pointer; absent reads as `false` (ARM leaves out a flag that is off).
    Flag(&'static str),
    /// Read by a function of the whole body.
    With(fn(&Value) -> Option<Value>),
}

impl Read {
    fn read(&self, body: &Value) -> Option<Value> {
        match self {
            Self::Text(pointer) => text(body, pointer).map(Value::from),
            Self::Int(pointer) => body
                .pointer(pointer)
                .and_then(Value::as_i64)
                .map(Value::from),
            Self::Flag(pointer) => Some(Value::Bool(
                body.pointer(pointer)
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            )),
            Self::With(read) => read(body),
        }
    }
}

/// A plain ARM kind.
pub(crate) struct Plain {
    /// Its body.
    pub body: fn(&Builder<'_>) -> Result<Option<Body>, BodyError>,
    /// The attributes compared for drift, `tags` included when the kind takes tags.
    pub compared: &'static [&'static str],
    /// Where ARM has each compared attribute other than `tags`.
    pub reads: &'static [(&'static str, Read)],
    /// Values only ARM knows, and where.
    pub known: &'static [(&'static str, Read)],
    /// The query its DELETE needs.
    pub delete_query: &'static [(&'static str, &'static str)],
    /// Read by a refresh with one list per resource group ([`Driver::listed`]).
    pub listed: bool,
}

/// The row most kinds are: tags compared, nothing else.
const TAGGED: Plain = Plain {
    body: |_| Ok(None),
    compared: &["tags"],
    reads: &[],
    known: &[],
    delete_query: &[],
    listed: false,
};

impl Driver for Plain {
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        (self.body)(b)
    }

    fn compared(&self) -> &'static [&'static str] {
        self.compared
    }

    fn observed(&self, name: &str, body: &Value, _want: Option<&Value>) -> Option<Value> {
        let (_, read) = self.reads.iter().find(|(n, _)| *n == name)?;
        read.read(body)
    }

    fn known(&self, body: &Value, known: &mut Attrs) {
        for (name, read) in self.known {
            if let Some(value) = read.read(body) {
                known.insert((*name).to_owned(), value);
            }
        }
    }

    fn delete_query(&self) -> &'static [(&'static str, &'static str)] {
        self.delete_query
    }

    fn listed(&self) -> bool {
        self.listed
    }
}

pub(crate) static RESOURCE_GROUP: Plain = Plain {
    body: |b| {
        Ok(Some(Body::ResourceGroup(ResourceGroup::new(
            b.text("location")?,
            b.tags()?,
        ))))
    },
    ..TAGGED
};

pub(crate) static VIRTUAL_NETWORK: Plain = Plain {
    body: |b| Ok(Some(Body::VirtualNetwork(b.virtual_network()?))),
    listed: true,
    ..TAGGED
};

pub(crate) static NETWORK_SECURITY_GROUP: Plain = Plain {
    body: |b| Ok(Some(Body::NetworkSecurityGroup(b.security_group()?))),
    listed: true,
    ..TAGGED
};

pub(crate) static PUBLIC_IP: Plain = Plain {
    body: |b| Ok(Some(Body::PublicIp(b.public_ip()?))),
    known: &[("ip_address", Read::Text("/properties/ipAddress"))],
    listed: true,
    ..TAGGED
};

/// The private IP of a NIC's first IP configuration that has one.
fn private_ip(body: &Value) -> Option<Value> {
    body.pointer("/properties/ipConfigurations")?
        .as_array()?
        .iter()
        .find_map(|c| text(c, "/properties/privateIPAddress"))
        .map(Value::from)
}

pub(crate) static NETWORK_INTERFACE: Plain = Plain {
    body: |b| Ok(Some(Body::NetworkInterface(b.network_interface()?))),
    compared: &["accelerated_networking", "tags"],
    reads: &[(
        "accelerated_networking",
        Read::Flag("/properties/enableAcceleratedNetworking"),
    )],
    known: &[("private_ip", Read::With(private_ip))],
    listed: true,
    ..TAGGED
};

pub(crate) static PROXIMITY_PLACEMENT_GROUP: Plain = Plain {
    body: |b| Ok(Some(Body::ProximityPlacementGroup(b.placement_group()?))),
    listed: true,
    ..TAGGED
};

pub(crate) static AVAILABILITY_SET: Plain = Plain {
    body: |b| Ok(Some(Body::AvailabilitySet(b.availability_set()?))),
    listed: true,
    ..TAGGED
};

pub(crate) static MANAGED_DISK: Plain = Plain {
    body: |b| Ok(Some(Body::ManagedDisk(b.disk()?))),
    compared: &["size_gb", "sku", "tags"],
    reads: &[
        ("size_gb", Read::Int("/properties/diskSizeGB")),
        ("sku", Read::Text("/sku/name")),
    ],
    listed: true,
    ..TAGGED
};

pub(crate) static STORAGE_ACCOUNT: Plain = Plain {
    body: |b| Ok(Some(Body::StorageAccount(b.storage_account()?))),
    compared: &["sku", "kind", "tags"],
    reads: &[
        ("sku", Read::Text("/sku/name")),
        ("kind", Read::Text("/kind")),
    ],
    listed: true,
    ..TAGGED
};

/// Blob containers and file shares take no tags (ARM refuses them; they carry the account's).
pub(crate) static BLOB_CONTAINER: Plain = Plain {
    body: |b| Ok(Some(Body::BlobContainer(b.container()?))),
    compared: &[],
    ..TAGGED
};

pub(crate) static FILE_SHARE: Plain = Plain {
    body: |b| Ok(Some(Body::FileShare(b.file_share()?))),
    compared: &["quota_gb"],
    reads: &[("quota_gb", Read::Int("/properties/shareQuota"))],
    ..TAGGED
};

pub(crate) static AUTO_SHUTDOWN_SCHEDULE: Plain = Plain {
    body: |b| Ok(Some(Body::AutoShutdownSchedule(b.schedule()?))),
    listed: true,
    ..TAGGED
};

/// A SAS is signed locally from the account key and never sent to ARM: no body, nothing read.
pub(crate) static SAS: Plain = Plain {
    body: |_| Ok(None),
    compared: &[],
    ..TAGGED
};

pub(crate) static LOG_ANALYTICS_WORKSPACE: Plain = Plain {
    body: |b| Ok(Some(Body::LogAnalytics(b.log_analytics()?))),
    ..TAGGED
};

pub(crate) static APP_INSIGHTS: Plain = Plain {
    body: |b| Ok(Some(Body::AppInsights(b.app_insights()?))),
    ..TAGGED
};

pub(crate) static CONTAINER_REGISTRY: Plain = Plain {
    body: |b| Ok(Some(Body::Registry(b.registry()?))),
    ..TAGGED
};

/// A workspace's DELETE is permanent (`forceToPurge`), so its name is free for the next apply
/// (decision 40).
pub(crate) static ML_WORKSPACE: Plain = Plain {
    body: |b| Ok(Some(Body::MlWorkspace(Box::new(b.ml_workspace()?)))),
    delete_query: &[("forceToPurge", "true")],
    ..TAGGED
};

/// Role definitions take no tags; a deleted one is found by its GET (absent: drift, made again
/// on apply).
pub(crate) static ROLE_DEFINITION: Plain = Plain {
    body: |b| Ok(Some(Body::RoleDefinition(b.role_definition()?))),
    compared: &[],
    ..TAGGED
};

/// A role assignment names its principal, known only once the VM exists: its request is built
/// at apply ([`crate::engine::bodies::role_assignment_request`]), never from the manifest
/// alone. It cannot change in place; the principal it names is read back for `principal_drift`.
pub(crate) static ROLE_ASSIGNMENT: Plain = Plain {
    body: |b| Err(b.principal_unknown()),
    compared: &[],
    known: &[("principal_id", Read::Text("/properties/principalId"))],
    ..TAGGED
};
