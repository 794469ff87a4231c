//! Attribute values as the plan shows them: HCL-like literals on one line.

use serde_json::Value;

/// One value on one line: strings quoted, lists `["a", "b"]`, objects `{ k = v }`.
pub(super) fn inline(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

/// An attribute or map key: bare when it is an identifier, quoted otherwise (`"dsinfra-address"`
/// has a dash, which HCL would read as a minus in a bare key of an object).
pub(super) fn key(name: &str) -> String {
    let bare = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if bare {
        name.to_owned()
    } else {
        Value::from(name).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_render_as_hcl_like_literals() {
        assert_eq!(inline(&json!("eastus")), "\"eastus\"");
        assert_eq!(inline(&json!(128)), "128");
        assert_eq!(
            inline(&json!(["10.0.0.0/16", true])),
            "[\"10.0.0.0/16\", true]"
        );
        assert_eq!(
            inline(&json!({"name": "default", "dsinfra-x": null})),
            "{ name = \"default\", \"dsinfra-x\" = null }"
        );
        assert_eq!(key("os_disk_sku"), "os_disk_sku");
        assert_eq!(key("managed-by"), "\"managed-by\"");
    }
}
