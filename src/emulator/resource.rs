//! What every provider handler uses about resources: their keys and canonical ids, the request's
//! target, the envelope tracked resources share, and ARM's not-found and not-implemented
//! answers. A leaf: it imports no handler.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::Ctx;
use super::path::ResourcePath;
use super::store::{Cloud, Kind};

/// 501 naming the request's method and path (see docs/emulator.md, "What is not implemented").
pub(crate) fn not_implemented(ctx: &Ctx<'_>) -> ArmError {
    ArmError::not_implemented(&ctx.method, &super::path::percent_decode(ctx.uri.path()))
}

/// The lower-cased id used as a key: names are case-insensitive.
pub(crate) fn key(id: &str) -> String {
    id.trim_end_matches('/').to_ascii_lowercase()
}

/// The key of the resource a child's key lives in (`.../managedclusters/c/agentpools/p` ->
/// `.../managedclusters/c`): the key without its last type and name. `None` for a top-level
/// resource's key, whose parent is its group, not a resource of a provider.
pub(crate) fn parent_key(key: &str) -> Option<&str> {
    let (head, _name) = key.rsplit_once('/')?;
    let (parent, _type) = head.rsplit_once('/')?;
    let (before, _) = parent.rsplit_once('/')?;
    // `.../providers/{namespace}/{type}/{name}` has a namespace there, not a resource.
    (parent.contains("/providers/") && !before.ends_with("/providers")).then_some(parent)
}

/// Builds the id ARM returns: canonical type spelling, the group's stored casing, the names as
/// the URL gave them.
pub(crate) fn canonical_id(path: &ResourcePath, kind: Kind, group: &str) -> String {
    let type_parts: Vec<&str> = kind.type_name().split('/').collect();
    let mut id = format!(
        "/subscriptions/{}/resourceGroups/{group}/providers/{}",
        path.sub, type_parts[0]
    );
    for (i, (_, name)) in path.segments.iter().enumerate() {
        id.push('/');
        id.push_str(type_parts.get(i + 1).copied().unwrap_or_default());
        id.push('/');
        id.push_str(name);
    }
    if kind == Kind::Schedule {
        // DevTestLab returns its ids in lower case.
        id = id.to_ascii_lowercase();
    }
    id
}

/// The `'{type}/{name}'` part of a ResourceNotFound message, e.g.
/// `Microsoft.Network/virtualNetworks/vnet/subnets/default`.
fn display_name(path: &ResourcePath, kind: Kind) -> (String, String) {
    let type_parts: Vec<&str> = kind.type_name().split('/').collect();
    let mut rtype = format!(
        "{}/{}",
        type_parts[0],
        type_parts.get(1).copied().unwrap_or_default()
    );
    let mut name = path
        .segments
        .first()
        .map(|(_, n)| n.clone())
        .unwrap_or_default();
    for (i, (_, n)) in path.segments.iter().enumerate().skip(1) {
        name = format!(
            "{name}/{}/{n}",
            type_parts.get(i + 1).copied().unwrap_or_default()
        );
    }
    if path.segments.len() > 1 {
        rtype = format!("{rtype}/{name}");
        let (head, tail) = rtype.rsplit_once('/').unwrap_or((&rtype, ""));
        return (head.to_owned(), tail.to_owned());
    }
    (rtype, name)
}

pub(crate) fn not_found(path: &ResourcePath, kind: Kind) -> ArmError {
    let (rtype, name) = display_name(path, kind);
    ArmError::not_found(&rtype, &name, &path.group)
}

/// Context a provider handler receives for one resource request.
pub(crate) struct Target<'p> {
    pub path: &'p ResourcePath,
    pub kind: Kind,
    /// Canonical id for a new resource (an existing one keeps its stored id).
    pub id: String,
    pub key: String,
    /// The group's stored name and key.
    pub group_name: String,
    pub group_key: String,
}

impl Target<'_> {
    pub fn name(&self) -> &str {
        self.path.name()
    }

    pub fn not_found(&self) -> ArmError {
        not_found(self.path, self.kind)
    }

    /// The stored id of an existing resource, else the canonical one.
    pub fn id_in(&self, cloud: &Cloud) -> String {
        cloud
            .resources
            .get(&self.key)
            .map_or_else(|| self.id.clone(), |r| r.id.clone())
    }
}

pub(crate) fn visible(cloud: &Cloud, key: &str) -> bool {
    cloud.resources.get(key).is_some_and(|r| !r.hidden)
}

/// Reads `location`, which every tracked resource requires.
pub(crate) fn require_location(body: &Value) -> Result<String, ArmError> {
    body.get("location")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            ArmError::new(
                400,
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })
}

/// Copies the writable top-level fields every tracked resource shares.
pub(crate) fn envelope(
    id: &str,
    name: &str,
    kind: Kind,
    location: Option<&str>,
    body: &Value,
) -> Value {
    let mut out = json!({"id": id, "name": name, "type": kind.type_name()});
    if let Some(location) = location {
        out["location"] = json!(location);
    }
    for field in [
        "tags",
        "zones",
        "sku",
        "kind",
        "extendedLocation",
        "identity",
        "plan",
    ] {
        if let Some(value) = body.get(field) {
            out[field] = value.clone();
        }
    }
    out
}

/// Checks that a referenced resource exists (and is visible), in the network provider's words.
pub(crate) fn require_reference(
    cloud: &Cloud,
    reference: &str,
    referrer: &str,
) -> Result<(), ArmError> {
    if visible(cloud, &key(reference)) {
        return Ok(());
    }
    Err(ArmError::new(
        400,
        "InvalidResourceReference",
        format!(
            "Resource {reference} referenced by resource {referrer} was not found. Please make sure \
             that the referenced resource exists, and that both resources are in the same region."
        ),
    ))
}

/// The tenant every emulated subscription belongs to: what `GET /subscriptions/{id}` names, and
/// what a key vault body made from it carries (any tenant works here; it only has to be stable).
pub(crate) const TENANT: &str = "72f988bf-0000-4000-8000-00000000e301";

#[cfg(test)]
mod tests {
    use super::parent_key;

    #[test]
    fn a_childs_key_names_its_parent_and_a_top_level_key_none() {
        let group = "/subscriptions/s/resourcegroups/rg";
        let cluster = format!("{group}/providers/microsoft.containerservice/managedclusters/c");
        assert_eq!(
            parent_key(&format!("{cluster}/agentpools/gpu")),
            Some(cluster.as_str())
        );
        assert_eq!(parent_key(&cluster), None);
        assert_eq!(parent_key(group), None);
    }
}
