//! The emulator's validation hooks themselves: they must be able to fail.

use std::sync::Arc;

use dsinfra::azure::types::network::VirtualNetwork;
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::{ArmClient, ResourceId, StaticTokenCredential};
use dsinfra::emulator::{self, EmulatorConfig, RecordedViolation, RequestInfo, ResponseInfo};
use serde_json::json;

use crate::harness::{LOCATION, SUB, env, group};

#[tokio::test]
async fn a_body_the_spec_forbids_is_refused_and_recorded() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    env.client
        .put_resource_group(&group("rg-hook"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    let vnet = ResourceId::virtual_network(SUB, "rg-hook", "vnet");
    let body = json!({
        "location": LOCATION,
        "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnetCount": 1}
    });
    let err = env
        .client
        .put::<_, serde_json::Value>(&vnet, &body)
        .await
        .expect_err("an undeclared property is refused");
    assert_eq!(err.status(), Some(400));
    assert_eq!(err.code(), Some("InvalidRequestContent"));
    assert_eq!(
        err.message(),
        Some(
            "The request content was invalid and could not be deserialized: \
             $.properties.subnetCount: UnknownProperty: property \"subnetCount\" is not declared \
             by the schema"
        )
    );
    assert_eq!(err.details().len(), 1);
    assert_eq!(err.details()[0].code, "InvalidRequestContent");
    let recorded = env.handle.request_violations();
    assert_eq!(
        recorded,
        [RecordedViolation {
            method: "PUT".into(),
            path: vnet.as_str().into(),
            status: None,
            message: "$.properties.subnetCount: UnknownProperty: property \"subnetCount\" is not \
                      declared by the schema"
                .into(),
        }]
    );
    // Nothing was created: the provider never saw the request.
    assert!(
        env.client
            .get::<VirtualNetwork>(&vnet)
            .await
            .expect("read")
            .is_none()
    );
    assert!(env.handle.response_violations().is_empty());
}

#[tokio::test]
async fn the_response_hook_records_without_changing_the_answer() {
    let handle = emulator::start(EmulatorConfig {
        latency_scale: 0.0,
        // A validator that objects to every created resource, to see it recorded.
        response_validator: Some(Arc::new(|_: &RequestInfo, response: &ResponseInfo| {
            if response.status == 201 {
                vec!["201 seen".to_owned()]
            } else {
                Vec::new()
            }
        })),
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("t")))
        .endpoint(handle.endpoint())
        .time_scale(0.0)
        .build()
        .expect("client");
    let created = client
        .put_resource_group(&group("rg-audit"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("the answer is unchanged");
    assert_eq!(created.location, LOCATION);
    assert_eq!(
        handle.response_violations(),
        [RecordedViolation {
            method: "PUT".into(),
            path: group("rg-audit").as_str().into(),
            status: Some(201),
            message: "201 seen".into(),
        }]
    );
    assert!(handle.request_violations().is_empty());
}
