//! Generic resource lists (Microsoft.Resources `Resources_List` and
//! `Resources_ListByResourceGroup`): every top-level resource of a subscription or group, in
//! ARM's `GenericResourceExpanded` shape, with the `$filter`, `$expand` and `$top` real clients
//! send, paged as every list is.
//!
//! ARM lists top-level resources only (a VNet, not its subnets; a storage account, not its
//! containers), and without `$expand` only the envelope: id, name, type, location, tags, sku,
//! kind, managedBy, identity. `$top` is the size of each page, not a cap on the whole list:
//! ARM answers `$top` items and a `nextLink` that keeps it.

use serde_json::{Map, Value};

use super::error::ArmError;
use super::groups;
use super::http::{Ctx, Reply};
use super::paging;
use super::render::render;
use super::resource::key;
use super::store::{Cloud, top_level};

/// The envelope fields a generic listing copies from the resource's own representation.
const ENVELOPE: &[&str] = &[
    "id",
    "name",
    "type",
    "location",
    "extendedLocation",
    "tags",
    "sku",
    "kind",
    "managedBy",
    "identity",
    "plan",
];

/// `GET /subscriptions/{s}/resources` (`group` `None`) or
/// `GET /subscriptions/{s}/resourceGroups/{g}/resources`.
pub(crate) fn list(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    group: Option<&str>,
) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    // Every resource's key starts with its group's key; the subscription's groups share this.
    let prefix = match group {
        Some(group) => format!("{}/providers/", groups::existing(cloud, sub, group)?.0),
        None => key(&format!("/subscriptions/{sub}/resourceGroups/")) + "/",
    };
    let filter = match ctx.query("$filter").filter(|f| !f.trim().is_empty()) {
        Some(text) => Some(Filter::parse(text).ok_or_else(|| invalid_filter(text))?),
        None => None,
    };
    let expand = Expand::parse(ctx.query("$expand").unwrap_or_default());
    let top = match ctx.query("$top") {
        Some(text) => Some(
            text.parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid_top(text))?,
        ),
        None => None,
    };
    let mut resources: Vec<_> = cloud
        .resources
        .iter()
        .filter(|(k, r)| k.starts_with(&prefix) && !r.hidden && top_level(r.kind))
        .map(|(_, r)| r)
        .collect();
    resources.sort_by_key(|r| r.seq);
    let items: Vec<Value> = resources
        .into_iter()
        .map(|r| (r, render(cloud, ctx, r)))
        .filter(|(_, body)| filter.as_ref().is_none_or(|f| f.matches(body)))
        .map(|(r, body)| generic(&body, r.provisioning_state(), &expand))
        .collect();
    paging::page_of(ctx, items, top)
}

/// The `GenericResourceExpanded` of one resource's full representation.
fn generic(body: &Value, provisioning_state: Option<&str>, expand: &Expand) -> Value {
    let mut out = Map::new();
    for field in ENVELOPE {
        if let Some(value) = body.get(*field).filter(|v| !v.is_null()) {
            out.insert((*field).to_owned(), value.clone());
        }
    }
    if expand.provisioning_state
        && let Some(state) = provisioning_state
    {
        out.insert("provisioningState".into(), Value::String(state.to_owned()));
    }
    Value::Object(out)
}

/// Which of `$expand=createdTime,changedTime,provisioningState` the emulator can add: the
/// provisioning state. It keeps no creation or change times (docs/emulator.md).
struct Expand {
    provisioning_state: bool,
}

impl Expand {
    fn parse(text: &str) -> Self {
        Self {
            provisioning_state: text
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case("provisioningState")),
        }
    }
}

/// One `$filter`: clauses joined by `and`, each `field eq 'value'` on `resourceType`, `name`,
/// `location`, `tagName` or `tagValue` (values compared case-insensitively, as ARM does).
#[derive(Debug, PartialEq)]
struct Filter {
    clauses: Vec<(Field, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    ResourceType,
    Name,
    Location,
    TagName,
    TagValue,
}

impl Filter {
    fn parse(text: &str) -> Option<Self> {
        let clauses = split_and(text)
            .into_iter()
            .map(|clause| {
                let (field, value) = clause.trim().split_once(" eq ")?;
                let field = match field.trim().to_ascii_lowercase().as_str() {
                    "resourcetype" => Field::ResourceType,
                    "name" => Field::Name,
                    "location" => Field::Location,
                    "tagname" => Field::TagName,
                    "tagvalue" => Field::TagValue,
                    _ => return None,
                };
                let value = value.trim().strip_prefix('\'')?.strip_suffix('\'')?;
                Some((field, value.replace("''", "'")))
            })
            .collect::<Option<Vec<_>>>()?;
        // ARM reads a tag value only together with its tag name.
        let has = |f: Field| clauses.iter().any(|(c, _)| *c == f);
        if has(Field::TagValue) && !has(Field::TagName) {
            return None;
        }
        Some(Self { clauses })
    }

    fn matches(&self, body: &Value) -> bool {
        let text = |field: &str| body.get(field).and_then(Value::as_str).unwrap_or_default();
        let tags = body.get("tags").and_then(Value::as_object);
        let tag_name = self
            .clauses
            .iter()
            .find(|(f, _)| *f == Field::TagName)
            .map(|(_, v)| v.as_str());
        self.clauses.iter().all(|(field, value)| match field {
            Field::ResourceType => text("type").eq_ignore_ascii_case(value),
            Field::Name => text("name").eq_ignore_ascii_case(value),
            Field::Location => text("location").eq_ignore_ascii_case(value),
            Field::TagName => tags.is_some_and(|t| t.keys().any(|k| k.eq_ignore_ascii_case(value))),
            Field::TagValue => tags.is_some_and(|t| {
                t.iter().any(|(k, v)| {
                    tag_name.is_some_and(|n| k.eq_ignore_ascii_case(n))
                        && v.as_str().is_some_and(|v| v.eq_ignore_ascii_case(value))
                })
            }),
        })
    }
}

/// Splits on the keyword ` and ` outside quoted values.
fn split_and(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    let lower = text.to_ascii_lowercase();
    let mut i = 0;
    while i < text.len() {
        if text.as_bytes()[i] == b'\'' {
            quoted = !quoted;
        } else if !quoted && lower[i..].starts_with(" and ") {
            parts.push(&text[start..i]);
            start = i + " and ".len();
            i = start;
            continue;
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts
}

fn invalid_filter(text: &str) -> ArmError {
    ArmError::new(
        400,
        "InvalidFilterInQueryString",
        format!("Invalid $filter '{text}' specified in the query string."),
    )
}

fn invalid_top(text: &str) -> ArmError {
    ArmError::new(
        400,
        "InvalidTopInQueryString",
        format!("Invalid $top '{text}' specified in the query string."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_and_clauses_and_refuse_the_rest() {
        let filter = Filter::parse("resourceType eq 'Microsoft.Compute/disks' and name eq 'it''s'")
            .expect("valid");
        assert_eq!(
            filter.clauses,
            [
                (Field::ResourceType, "Microsoft.Compute/disks".to_owned()),
                (Field::Name, "it's".to_owned())
            ]
        );
        assert!(Filter::parse("name eq 'a and b'").is_some());
        assert!(Filter::parse("$filter=resourceType eq 'x'").is_none());
        assert!(Filter::parse("substringof('a', name)").is_none());
        assert!(Filter::parse("tagValue eq 'v'").is_none());
        assert!(Filter::parse("resourceType eq x").is_none());
    }
}
