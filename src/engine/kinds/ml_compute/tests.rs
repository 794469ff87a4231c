//! The AmlCompute driver on its own: what it reads back from ARM's body.

use serde_json::json;

use super::*;
use crate::engine::kinds;
use crate::engine::refresh::changed_attributes;

fn attrs(value: serde_json::Value) -> crate::model::Attrs {
    serde_json::from_value(value).expect("attributes")
}

#[test]
fn an_aml_clusters_scale_settings_are_its_count_or_parked() {
    let compute = |min: i64, max: i64| {
        json!({"properties": {"properties": {"vmSize": "STANDARD_NC4AS_T4_V3",
            "scaleSettings": {"minNodeCount": min, "maxNodeCount": max,
                "nodeIdleTimeBeforeScaleDown": "PT2M"}}}})
    };
    let want = attrs(json!({"size": "Standard_NC4as_T4_v3", "count": 4,
        "idle_seconds_before_scaledown": 120}));
    assert!(changed_attributes(KIND, &want, &compute(4, 4)).is_empty());
    assert_eq!(changed_attributes(KIND, &want, &compute(2, 2)), ["count"]);
    // Autoscaling between 0 and 4 is not the fixed size asked for: the minimum differs.
    assert_eq!(
        kinds::observed(KIND, "count", &compute(0, 4), want.get("count")),
        Some(json!(0))
    );
    assert_eq!(
        kinds::observed(KIND, "count", &compute(4, 6), want.get("count")),
        Some(json!(6))
    );
    // Scaled to zero is parked, not resized.
    assert!(changed_attributes(KIND, &want, &compute(0, 0)).is_empty());
    assert_eq!(
        DRIVER.power_in_body(&compute(0, 0)),
        Some(PowerState::Deallocated)
    );
    assert_eq!(
        DRIVER.power_in_body(&compute(4, 4)),
        Some(PowerState::Running)
    );
    assert_eq!(DRIVER.power_in_body(&json!({})), None);
}
