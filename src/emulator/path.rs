//! Parsing ARM request paths into what they address: a resource group, a resource (possibly
//! nested, possibly with an action), a provider-level endpoint, or an operation result.

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/subscriptions/{s}`: the subscription itself (Subscriptions_Get names its tenant).
    Subscription { sub: String },
    /// `/subscriptions/{s}/resourcegroups`
    Groups { sub: String },
    /// `/subscriptions/{s}/resources`: every resource of the subscription.
    Resources { sub: String },
    /// `/subscriptions/{s}/resourceGroups/{g}/resources`: every resource of a group.
    GroupResources { sub: String, group: String },
    /// `/subscriptions/{s}/resourcegroups/{rg}`
    Group { sub: String, group: String },
    /// `/subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/{type}/{name}]*[/{tail}]`
    Resource(ResourcePath),
    /// `/subscriptions/{s}/providers`: the resource providers.
    Providers { sub: String },
    /// `/subscriptions/{s}/providers/{ns}/locations/{loc}/{rest...}`
    Location {
        sub: String,
        namespace: String,
        location: String,
        rest: Vec<String>,
    },
    /// `/subscriptions/{s}/providers/{ns}/{rest...}`
    Provider {
        sub: String,
        namespace: String,
        rest: Vec<String>,
    },
    /// `/subscriptions/{s}/operationresults/{id}` (resource group deletes)
    GroupOperation { sub: String, id: String },
    /// Anything else.
    Unknown,
}

/// A resource inside a group, with an optional trailing segment (an action such as `start`, a
/// sub-view such as `instanceView`, or the collection name of a list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    pub sub: String,
    pub group: String,
    pub namespace: String,
    /// `(type, name)` pairs from the outermost resource inward.
    pub segments: Vec<(String, String)>,
    pub tail: Option<String>,
}

impl ResourcePath {
    /// The resource type, e.g. `Microsoft.Storage/storageAccounts/blobServices/containers`, as
    /// spelled in the URL.
    pub fn rtype(&self) -> String {
        let mut out = self.namespace.clone();
        for (t, _) in &self.segments {
            out.push('/');
            out.push_str(t);
        }
        out
    }

    /// The innermost name.
    pub fn name(&self) -> &str {
        self.segments.last().map_or("", |(_, n)| n.as_str())
    }

    /// The same path without its last `(type, name)` pair and tail: the parent resource.
    pub fn parent(&self) -> Option<ResourcePath> {
        (self.segments.len() > 1).then(|| ResourcePath {
            segments: self.segments[..self.segments.len() - 1].to_vec(),
            tail: None,
            ..self.clone()
        })
    }
}

/// Decodes `%XX` escapes; ARM ids in examples contain `{` and `}`, which clients escape.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(hex) = std::str::from_utf8(&bytes[i + 1..i + 3])
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a decoded-or-raw request path (no query string).
pub(crate) fn parse(path: &str) -> Route {
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    if segments.len() == 2 && segments[0].eq_ignore_ascii_case("subscriptions") {
        return Route::Subscription {
            sub: segments[1].clone(),
        };
    }
    if segments.len() < 3 || !segments[0].eq_ignore_ascii_case("subscriptions") {
        return Route::Unknown;
    }
    let sub = segments[1].clone();
    let kind = segments[2].to_ascii_lowercase();
    let rest = &segments[3..];
    match kind.as_str() {
        "resourcegroups" => match rest.len() {
            0 => Route::Groups { sub },
            1 => Route::Group {
                sub,
                group: rest[0].clone(),
            },
            2 if rest[1].eq_ignore_ascii_case("resources") => Route::GroupResources {
                sub,
                group: rest[0].clone(),
            },
            n if n >= 4 && rest[1].eq_ignore_ascii_case("providers") => {
                let pairs = &rest[3..];
                if pairs.is_empty() {
                    return Route::Unknown;
                }
                let segments = pairs
                    .chunks(2)
                    .filter(|c| c.len() == 2)
                    .map(|c| (c[0].clone(), c[1].clone()))
                    .collect();
                let tail = (pairs.len() % 2 == 1).then(|| pairs[pairs.len() - 1].clone());
                Route::Resource(ResourcePath {
                    sub,
                    group: rest[0].clone(),
                    namespace: rest[2].clone(),
                    segments,
                    tail,
                })
            }
            _ => Route::Unknown,
        },
        "providers" if !rest.is_empty() => {
            let namespace = rest[0].clone();
            if rest.len() >= 3 && rest[1].eq_ignore_ascii_case("locations") {
                Route::Location {
                    sub,
                    namespace,
                    location: rest[2].clone(),
                    rest: rest[3..].to_vec(),
                }
            } else {
                Route::Provider {
                    sub,
                    namespace,
                    rest: rest[1..].to_vec(),
                }
            }
        }
        "providers" => Route::Providers { sub },
        "resources" if rest.is_empty() => Route::Resources { sub },
        "operationresults" if rest.len() == 1 => Route::GroupOperation {
            sub,
            id: rest[0].clone(),
        },
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_resources_parse_into_pairs() {
        let Route::Resource(path) = parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/c1",
        ) else {
            panic!("expected a resource route");
        };
        assert_eq!(
            path.rtype(),
            "Microsoft.Storage/storageAccounts/blobServices/containers"
        );
        assert_eq!(path.name(), "c1");
        assert_eq!(path.tail, None);
        assert_eq!(
            path.parent().map(|p| p.name().to_owned()),
            Some("default".to_owned())
        );
    }

    #[test]
    fn actions_are_tails() {
        let Route::Resource(path) = parse(
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Compute/virtualMachines/vm/start",
        ) else {
            panic!("expected a resource route");
        };
        assert_eq!(path.tail.as_deref(), Some("start"));
        assert_eq!(path.rtype(), "Microsoft.Compute/virtualMachines");
    }

    #[test]
    fn provider_and_group_routes() {
        assert_eq!(
            parse("/subscriptions/s/resourcegroups/My-RG"),
            Route::Group {
                sub: "s".into(),
                group: "My-RG".into()
            }
        );
        assert!(matches!(
            parse("/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages"),
            Route::Location { rest, .. } if rest == ["usages"]
        ));
        assert!(matches!(
            parse("/subscriptions/s/providers/Microsoft.Compute/skus"),
            Route::Provider { rest, .. } if rest == ["skus"]
        ));
        assert!(matches!(
            parse("/subscriptions/s/operationresults/abc"),
            Route::GroupOperation { .. }
        ));
        assert_eq!(
            parse("/subscriptions/s/providers"),
            Route::Providers { sub: "s".into() }
        );
        assert_eq!(parse("/nope"), Route::Unknown);
        assert_eq!(
            parse("/subscriptions/s"),
            Route::Subscription { sub: "s".into() }
        );
    }

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(percent_decode("%7Bsubscription-id%7D"), "{subscription-id}");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
