//! Resource providers and registration, VM sizes in a location, storage `regenerateKey`, and the
//! answer to requests the emulator does not implement. Every answer of an operation the specs
//! hold is validated against its response schema.

use std::sync::OnceLock;

use dsinfra::openapi::{Specs, significant};

use super::*;

/// The specs, loaded once; `None` (with a note) when they are not beside the checkout, except
/// under CI, where conformance must never be skipped silently.
fn specs() -> Option<&'static Specs> {
    static SPECS: OnceLock<Option<Specs>> = OnceLock::new();
    SPECS
        .get_or_init(|| match Specs::load_default() {
            Ok(specs) => Some(specs),
            Err(missing) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(!ci, "conformance specs are required under CI: {missing}");
                eprintln!("SKIPPING spec validation: {missing}");
                None
            }
        })
        .as_ref()
}

/// Asserts that `body`, sent as `method path`, is what the spec's operation accepts.
pub(super) fn conforms_request(method: &str, path: &str, version: &str, body: &Value) {
    let Some(specs) = specs() else { return };
    let op = specs
        .operation(method, path, Some(version))
        .unwrap_or_else(|| panic!("{method} {path} {version} is not in the specs"));
    let violations = op.validate_request(Some(body));
    let strict = significant(&violations, true);
    assert!(
        strict.is_empty(),
        "{method} {path} sent a body {} refuses:\n{strict:?}",
        op.operation_id()
    );
}

/// Asserts that `resp`, the answer to `method path`, is what the spec's operation answers.
pub(super) fn conforms(method: &str, path: &str, version: &str, resp: &Resp) {
    let Some(specs) = specs() else { return };
    let op = specs
        .operation(method, path, Some(version))
        .unwrap_or_else(|| panic!("{method} {path} {version} is not in the specs"));
    let body = (resp.body != Value::Null).then_some(&resp.body);
    let violations = op.validate_response(resp.status, body);
    let strict = significant(&violations, true);
    assert!(
        strict.is_empty(),
        "{method} {path} answered {} against {}:\n{strict:?}",
        resp.status,
        op.operation_id()
    );
}

fn provider_path(namespace: &str) -> String {
    format!("/subscriptions/{SUB}/providers/{namespace}")
}

fn type_of<'a>(provider: &'a Value, rtype: &str) -> &'a Value {
    provider["resourceTypes"]
        .as_array()
        .and_then(|types| types.iter().find(|t| t["resourceType"] == rtype))
        .unwrap_or_else(|| panic!("{} lists no {rtype}: {provider}", provider["namespace"]))
}

#[tokio::test]
async fn providers_list_pages_and_each_shows_the_types_the_emulator_serves() {
    let env = env(EmulatorConfig {
        page_size: 2,
        ..fast()
    })
    .await;
    let list = format!("/subscriptions/{SUB}/providers");
    let mut resp = env.get(&list, RESOURCES).await;
    let mut namespaces = Vec::new();
    let mut pages = 0;
    loop {
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        conforms("GET", &list, RESOURCES, &resp);
        pages += 1;
        for provider in resp.body["value"].as_array().expect("value") {
            namespaces.push(
                provider["namespace"]
                    .as_str()
                    .expect("namespace")
                    .to_owned(),
            );
        }
        let Some(next) = resp.body["nextLink"].as_str().map(str::to_owned) else {
            break;
        };
        resp = env.send("GET", &next, None, Some(&env.token)).await;
    }
    namespaces.sort();
    assert_eq!(
        namespaces,
        [
            "Microsoft.Authorization",
            "Microsoft.Compute",
            "Microsoft.ContainerRegistry",
            "Microsoft.ContainerService",
            "Microsoft.DevTestLab",
            "Microsoft.Insights",
            "Microsoft.KeyVault",
            "Microsoft.MachineLearningServices",
            "Microsoft.Network",
            "Microsoft.OperationalInsights",
            "Microsoft.Resources",
            "Microsoft.Storage"
        ]
    );
    assert_eq!(pages, 6, "eleven providers, two per page");

    let path = provider_path("microsoft.compute");
    let compute = env.get(&path, RESOURCES).await;
    assert_eq!(compute.status, 200, "{:?}", compute.body);
    conforms("GET", &path, RESOURCES, &compute);
    assert_eq!(
        compute.body["id"],
        format!("/subscriptions/{SUB}/providers/Microsoft.Compute")
    );
    assert_eq!(compute.body["namespace"], "Microsoft.Compute");
    assert_eq!(compute.body["registrationState"], "Registered");
    let vms = type_of(&compute.body, "virtualMachines");
    assert_eq!(vms["apiVersions"], json!([COMPUTE]));
    assert_eq!(vms["capabilities"], "SupportsTags, SupportsLocation");
    assert!(
        vms["locations"]
            .as_array()
            .is_some_and(|l| l.contains(&json!("eastus"))),
        "{vms}"
    );
    assert_eq!(
        type_of(&compute.body, "disks")["apiVersions"],
        json!(["2025-01-02"])
    );
    type_of(&compute.body, "locations/vmSizes");
    assert!(vms.get("aliases").is_none(), "aliases only when expanded");
    let expanded = env
        .get(&format!("{path}?$expand=resourceTypes/aliases"), RESOURCES)
        .await;
    conforms("GET", &path, RESOURCES, &expanded);
    assert_eq!(
        type_of(&expanded.body, "virtualMachines")["aliases"],
        json!([])
    );

    let dtl = env
        .get(&provider_path("Microsoft.DevTestLab"), RESOURCES)
        .await;
    assert_eq!(
        type_of(&dtl.body, "schedules")["apiVersions"],
        json!(["2018-09-15"])
    );
    let storage = env
        .get(&provider_path("Microsoft.Storage"), RESOURCES)
        .await;
    type_of(&storage.body, "storageAccounts/blobServices/containers");
    let types_path = format!("{}/resourceTypes", provider_path("Microsoft.Network"));
    let types = env.get(&types_path, RESOURCES).await;
    conforms("GET", &types_path, RESOURCES, &types);
    assert!(
        types.body["value"].as_array().is_some_and(|t| t
            .iter()
            .any(|t| t["resourceType"] == "virtualNetworks/subnets")),
        "{:?}",
        types.body
    );
}

fn schedule_body(vm: &str) -> Value {
    json!({"location": "eastus", "properties": {"status": "Enabled", "taskType": "ComputeVmShutdownTask",
        "dailyRecurrence": {"time": "1900"}, "timeZoneId": "UTC", "targetResourceId": vm,
        "notificationSettings": {"status": "Disabled", "timeInMinutes": 30}}})
}

#[tokio::test]
async fn an_unregistered_namespace_answers_missing_subscription_registration_until_registered() {
    let env = env(EmulatorConfig {
        // Registration takes a minute in ARM: 0.6 s here.
        latency_scale: 0.01,
        unregistered: vec!["microsoft.devtestlab".into()],
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let schedule = res("rg", "Microsoft.DevTestLab/schedules/shutdown-computevm-vm");
    let refused = env.put(&schedule, "2018-09-15", &schedule_body(&vm)).await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "MissingSubscriptionRegistration")
    );
    assert_eq!(
        refused.message(),
        "The subscription is not registered to use namespace 'Microsoft.DevTestLab'. See \
         https://aka.ms/rps-not-found for how to register subscriptions."
    );
    // Reads and subscription-wide lists of the namespace are refused alike.
    let read = env.get(&schedule, "2018-09-15").await;
    assert_eq!(read.code(), "MissingSubscriptionRegistration");
    let listed = env
        .get(
            &provider_path("Microsoft.DevTestLab/schedules"),
            "2018-09-15",
        )
        .await;
    assert_eq!(listed.code(), "MissingSubscriptionRegistration");
    let path = provider_path("Microsoft.DevTestLab");
    let before = env.get(&path, RESOURCES).await;
    assert_eq!(before.body["registrationState"], "NotRegistered");
    assert_eq!(before.body["registrationPolicy"], "RegistrationRequired");

    let register = format!("{path}/register");
    let registering = env.post(&register, RESOURCES).await;
    assert_eq!(registering.status, 200, "{:?}", registering.body);
    conforms("POST", &register, RESOURCES, &registering);
    assert_eq!(registering.body["registrationState"], "Registering");
    assert_eq!(registering.body["namespace"], "Microsoft.DevTestLab");
    let early = env.put(&schedule, "2018-09-15", &schedule_body(&vm)).await;
    assert_eq!(
        early.code(),
        "MissingSubscriptionRegistration",
        "not usable while registering"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        env.get(&path, RESOURCES).await.body["registrationState"],
        "Registered"
    );
    let created = env.put(&schedule, "2018-09-15", &schedule_body(&vm)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    // Registering again changes nothing.
    let again = env.post(&register, RESOURCES).await;
    assert_eq!(again.body["registrationState"], "Registered");

    let unregister = format!("{path}/unregister");
    let leaving = env.post(&unregister, RESOURCES).await;
    conforms("POST", &unregister, RESOURCES, &leaving);
    assert_eq!(leaving.body["registrationState"], "Unregistering");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        env.get(&path, RESOURCES).await.body["registrationState"],
        "NotRegistered"
    );
    // Other namespaces were never affected.
    assert_eq!(
        env.get(&provider_path("Microsoft.Compute"), RESOURCES)
            .await
            .body["registrationState"],
        "Registered"
    );
    assert_eq!(env.get(&register, RESOURCES).await.status, 405);
}

#[tokio::test]
async fn vm_sizes_in_a_location_are_the_sizes_offered_there() {
    let env = env(EmulatorConfig {
        vm_sizes: vec![
            emulator::VmSizeSpec::new("Standard_NC6s_v3", 6, "standardNCSv3Family")
                .with_memory(114_688, Some(344_064)),
            emulator::VmSizeSpec::new("Standard_D4s_v5", 4, "standardDSv5Family"),
            emulator::VmSizeSpec::new("Standard_ND40rs_v2", 40, "standardNDSv2Family"),
        ],
        sku_restrictions: vec![SkuRestriction {
            size: "Standard_ND40rs_v2".into(),
            location: "eastus".into(),
            zones: Vec::new(),
        }],
        ..fast()
    })
    .await;
    let path = format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/vmSizes");
    let sizes = env.get(&path, COMPUTE).await;
    assert_eq!(sizes.status, 200, "{:?}", sizes.body);
    conforms("GET", &path, COMPUTE, &sizes);
    assert_eq!(
        sizes.body,
        json!({"value": [
            {"name": "Standard_NC6s_v3", "numberOfCores": 6, "osDiskSizeInMB": 1_047_552,
             "memoryInMB": 114_688, "resourceDiskSizeInMB": 344_064},
            {"name": "Standard_D4s_v5", "numberOfCores": 4, "osDiskSizeInMB": 1_047_552},
        ]}),
        "the size restricted in eastus is not offered there"
    );
    let west = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/westus2/vmSizes"),
            COMPUTE,
        )
        .await;
    assert_eq!(west.body["value"].as_array().map(Vec::len), Some(3));
    let nowhere = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/atlantis/vmSizes"),
            COMPUTE,
        )
        .await;
    assert_eq!(
        (nowhere.status, nowhere.code()),
        (400, "NoRegisteredProviderFound")
    );
}

#[tokio::test]
async fn regenerate_key_replaces_one_key_which_list_keys_and_sas_then_use() {
    let env = env(fast()).await;
    env.group("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/acct01");
    let accepted = env
        .put(
            &account,
            STORAGE,
            &json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "location": "eastus"}),
        )
        .await;
    env.poll_location(accepted.header("location").expect("Location"))
        .await;
    let keys_of = |resp: &Resp| -> Vec<String> {
        resp.body["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["value"].as_str().expect("value").to_owned())
            .collect()
    };
    let sas_body = json!({"signedServices": "b", "signedResourceTypes": "sco", "signedPermission": "rl",
        "signedExpiry": "2030-01-01T00:00:00Z", "keyToSign": "key1"});
    let sas = format!("{account}/listAccountSas");
    let sas_before = env.call("POST", &sas, STORAGE, Some(&sas_body)).await;
    assert_eq!(sas_before.status, 200, "{:?}", sas_before.body);
    let before = keys_of(&env.post(&format!("{account}/listKeys"), STORAGE).await);

    let regenerate = format!("{account}/regenerateKey");
    let answer = env
        .call(
            "POST",
            &regenerate,
            STORAGE,
            Some(&json!({"keyName": "key1"})),
        )
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    conforms("POST", &regenerate, STORAGE, &answer);
    let after = keys_of(&answer);
    assert_ne!(after[0], before[0], "key1 is new");
    assert_eq!(after[1], before[1], "key2 is kept");
    assert_eq!(answer.body["keys"][0]["keyName"], "key1");
    assert_eq!(answer.body["keys"][0]["permissions"], "FULL");
    let listed = env.post(&format!("{account}/listKeys"), STORAGE).await;
    assert_eq!(keys_of(&listed), after);
    let sas_after = env.call("POST", &sas, STORAGE, Some(&sas_body)).await;
    assert_ne!(
        sas_after.body["accountSasToken"], sas_before.body["accountSasToken"],
        "a SAS signed with the old key1 no longer matches"
    );

    let bad = env
        .call(
            "POST",
            &regenerate,
            STORAGE,
            Some(&json!({"keyName": "key3"})),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (400, "InvalidValuesForRequestParameters")
    );
    assert_eq!(
        keys_of(&env.post(&format!("{account}/listKeys"), STORAGE).await),
        after
    );
}

#[tokio::test]
async fn requests_the_emulator_does_not_serve_answer_not_implemented_naming_them() {
    let env = env(fast()).await;
    env.group("rg").await;
    let cases = [
        (
            "GET",
            format!("/subscriptions/{SUB}/providers/Microsoft.Batch"),
        ),
        ("PUT", res("rg", "Microsoft.Batch/batchAccounts/ba")),
        (
            "GET",
            format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/publishers"),
        ),
        ("GET", format!("/subscriptions/{SUB}/locations")),
    ];
    for (method, path) in &cases {
        let body = json!({"location": "eastus"});
        let resp = env
            .call(
                method,
                path,
                "2024-01-01",
                (*method == "PUT").then_some(&body),
            )
            .await;
        assert_eq!(
            (resp.status, resp.code()),
            (501, "NotImplemented"),
            "{method} {path}: {:?}",
            resp.body
        );
        assert_eq!(
            resp.message(),
            format!(
                "The dsinfra emulator does not implement {method} {path}; see docs/emulator.md \
                 for what it covers."
            )
        );
    }
    // A VM that exists: the action is what is missing, not the VM.
    env.network("rg").await;
    env.create(
        &res("rg", "Microsoft.Compute/virtualMachines/vm"),
        COMPUTE,
        &vm_body("rg", "Standard_D4s_v5"),
    )
    .await;
    let capture = env
        .post(
            &res("rg", "Microsoft.Compute/virtualMachines/vm/capture"),
            COMPUTE,
        )
        .await;
    assert_eq!((capture.status, capture.code()), (501, "NotImplemented"));

    // Where ARM itself answers: a type that does not exist in a namespace the emulator serves.
    let bogus = env
        .get(&res("rg", "Microsoft.Compute/notAType/x"), COMPUTE)
        .await;
    assert_eq!((bogus.status, bogus.code()), (404, "InvalidResourceType"));
    assert_eq!(
        bogus.message(),
        format!(
            "The resource type 'notAType' could not be found in the namespace 'Microsoft.Compute' \
             for api version '{COMPUTE}'."
        )
    );
    let listed = env
        .get(&provider_path("Microsoft.Compute/notAType"), COMPUTE)
        .await;
    assert_eq!((listed.status, listed.code()), (404, "InvalidResourceType"));
    assert_eq!(
        listed.message(),
        format!(
            "The resource type 'notAType' could not be found in the namespace 'Microsoft.Compute' \
             for api version '{COMPUTE}'."
        )
    );
}
