//! The validator itself: every example request and response passes, broken bodies fail with
//! located violations, open enums follow `x-ms-enum`.

use super::*;

#[test]
fn every_example_request_body_passes_the_validator() {
    let Some(specs) = specs() else { return };
    let examples = specs.examples();
    assert!(
        examples.len() >= 35,
        "expected the shipped examples, found {}",
        examples.len()
    );
    let mut checked = 0;
    for example in &examples {
        let op = example.operation;
        let Some(param) = op.body_parameter() else {
            continue;
        };
        let Some(body) = example.body["parameters"].get(param) else {
            continue;
        };
        let violations = op.validate_request(Some(body));
        let strict = significant(&violations, true);
        assert!(
            strict.is_empty(),
            "{} ({}) request fails:{}",
            example.title,
            example.file,
            describe(&strict)
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} example requests had bodies");
}

#[test]
fn every_example_response_body_passes_the_validator() {
    let Some(specs) = specs() else { return };
    for example in specs.examples() {
        let Some(responses) = example.body["responses"].as_object() else {
            continue;
        };
        for (status, response) in responses {
            let status: u16 = status.parse().expect("numeric status");
            let violations = example
                .operation
                .validate_response(status, response.get("body"));
            // Examples are documentation: unknown properties in them are tolerated, type and
            // enum errors are not.
            let errors = significant(&violations, false);
            assert!(
                errors.is_empty(),
                "{} ({}) response {status} fails:{}",
                example.title,
                example.file,
                describe(&errors)
            );
        }
    }
}

fn vnet_op(specs: &Specs) -> dsinfra::openapi::Operation<'_> {
    specs
        .operation(
            "PUT",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v",
            Some("2024-07-01"),
        )
        .expect("VNet PUT is in the specs")
}

fn kinds(violations: &[Violation]) -> Vec<(String, ViolationKind)> {
    violations
        .iter()
        .map(|v| (v.path.clone(), v.kind))
        .collect()
}

#[test]
fn broken_bodies_fail_with_located_violations() {
    let Some(specs) = specs() else { return };
    let op = vnet_op(&specs);
    assert_eq!(op.operation_id(), "VirtualNetworks_CreateOrUpdate");
    assert!(op.long_running());
    let good = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    assert_eq!(op.validate_request(Some(&good)), vec![]);

    let wrong_type = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": "10.0.0.0/16"}}});
    assert_eq!(
        kinds(&op.validate_request(Some(&wrong_type))),
        [(
            "$.properties.addressSpace.addressPrefixes".to_owned(),
            ViolationKind::Type
        )]
    );

    let read_only = json!({"location": "eastus", "properties": {"provisioningState": "Succeeded"}});
    assert_eq!(
        kinds(&op.validate_request(Some(&read_only))),
        [(
            "$.properties.provisioningState".to_owned(),
            ViolationKind::ReadOnly
        )]
    );

    let unknown = json!({"location": "eastus", "properties": {"adressSpace": {}}});
    let violations = op.validate_request(Some(&unknown));
    assert_eq!(
        kinds(&violations),
        [(
            "$.properties.adressSpace".to_owned(),
            ViolationKind::UnknownProperty
        )]
    );
    assert!(
        significant(&violations, false).is_empty(),
        "unknown properties are the caller's choice"
    );

    let nsg = specs
        .operation("PUT", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/n", Some("2024-07-01"))
        .expect("NSG PUT");
    let vm = specs
        .operation(
            "PUT",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
            Some("2024-11-01"),
        )
        .expect("VM PUT");
    // Caching is a closed enum (modelAsString false).
    let bad_enum = json!({"location": "eastus", "properties": {"storageProfile": {"osDisk": {"createOption": "FromImage", "caching": "Sometimes"}}}});
    assert_eq!(
        kinds(&vm.validate_request(Some(&bad_enum))),
        [(
            "$.properties.storageProfile.osDisk.caching".to_owned(),
            ViolationKind::Enum
        )]
    );
    let any_case = json!({"location": "eastus", "properties": {"storageProfile": {"osDisk": {"createOption": "FromImage", "caching": "readwrite"}}}});
    assert_eq!(
        vm.validate_request(Some(&any_case)),
        vec![],
        "ARM enums compare case-insensitively"
    );
    let missing = json!({"location": "eastus", "properties": {"securityRules": [{"name": "r", "properties": {
        "access": "Allow", "priority": 100, "direction": "Inbound"}}]}});
    assert_eq!(
        kinds(&nsg.validate_request(Some(&missing))),
        [(
            "$.properties.securityRules[0].properties".to_owned(),
            ViolationKind::Required
        )]
    );

    // Responses: undeclared statuses and missing bodies are caught too.
    assert_eq!(
        kinds(&op.validate_response(202, None)),
        [("$".to_owned(), ViolationKind::UndeclaredStatus)]
    );
    assert_eq!(
        kinds(&op.validate_response(200, None)),
        [("$".to_owned(), ViolationKind::Body)]
    );
    let error = json!({"error": {"code": "X", "message": "y"}});
    assert!(
        op.validate_response(400, Some(&error)).is_empty(),
        "errors validate against default"
    );
}

#[test]
fn open_enums_and_definitions_follow_x_ms_enum() {
    let Some(specs) = specs() else { return };
    let vm = specs
        .operation(
            "PUT",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
            Some("2024-11-01"),
        )
        .expect("VM PUT");
    // vmSize is an enum with modelAsString: any size name is accepted.
    let body = json!({"location": "eastus", "properties": {"hardwareProfile": {"vmSize": "Standard_Future_v9"}}});
    assert_eq!(vm.validate_request(Some(&body)), vec![]);
    let violations = specs
        .validate_definition(
            "common-types/resource-management/v3/types.json",
            "ErrorResponse",
            &json!({"error": {"code": 5}}),
            Direction::Response,
        )
        .expect("definition exists");
    assert_eq!(
        kinds(&violations),
        [("$.error.code".to_owned(), ViolationKind::Type)]
    );
}
