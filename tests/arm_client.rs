//! The ARM client driven over real HTTP against a scripted server on 127.0.0.1.
//!
//! Each test scripts the exact sequence of answers real ARM gives (arm.md section 2), runs one
//! client call, and then checks both the result and what the server received: methods, paths,
//! api-versions, headers, and that nothing was sent that should not have been (no PUT re-sent
//! to poll, no retry of a non-idempotent POST).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use dsinfra::azure::credential::TokenFuture;
use dsinfra::azure::types::compute::{HardwareProfile, VirtualMachineProperties, VmAction};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::types::storage::{StorageAccountCreate, StorageSkuName};
use dsinfra::azure::{
    AccessToken, ArmClient, DeleteOutcome, LroProgress, ProgressState, ResourceId, RetryPolicy,
    Secret, StaticTokenCredential, TokenCredential,
};
use serde_json::{Value, json};

const SUB: &str = "00000000-0000-0000-0000-000000000001";

/// One scripted answer.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

fn answer(status: u16, body: Option<Value>) -> Answer {
    Answer {
        status,
        headers: Vec::new(),
        body,
    }
}

impl Answer {
    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// What the server saw.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    client_request_id: Option<String>,
    user_agent: Option<String>,
    content_length: Option<String>,
    body: Option<Value>,
}

impl Received {
    fn api_version(&self) -> Option<&str> {
        self.query
            .split('&')
            .find_map(|pair| pair.strip_prefix("api-version="))
    }
}

#[derive(Default)]
struct Script {
    answers: Mutex<VecDeque<Answer>>,
    received: Mutex<Vec<Received>>,
}

async fn handle(
    State(script): State<Arc<Script>>,
    method: HttpMethod,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    script
        .received
        .lock()
        .expect("the test server's lock is never poisoned")
        .push(Received {
            method: method.to_string(),
            path: uri.path().to_string(),
            query: uri.query().unwrap_or_default().to_string(),
            authorization: header("authorization"),
            client_request_id: header("x-ms-client-request-id"),
            user_agent: header("user-agent"),
            content_length: header("content-length"),
            body: serde_json::from_slice(&body).ok(),
        });
    let next = script
        .answers
        .lock()
        .expect("the test server's lock is never poisoned")
        .pop_front();
    let Some(answer) = next else {
        return (
            StatusCode::IM_A_TEAPOT,
            "the script has no answer left for this request",
        )
            .into_response();
    };
    let mut out = HeaderMap::new();
    for (name, value) in &answer.headers {
        out.insert(
            HeaderName::from_bytes(name.as_bytes()).expect("scripted header names are valid"),
            HeaderValue::from_str(value).expect("scripted header values are valid"),
        );
    }
    let status = StatusCode::from_u16(answer.status).expect("scripted statuses are valid");
    match answer.body {
        Some(body) => (status, out, axum::Json(body)).into_response(),
        None => (status, out).into_response(),
    }
}

/// A scripted ARM stand-in on 127.0.0.1:0.
struct Server {
    base: String,
    script: Arc<Script>,
}

impl Server {
    async fn start() -> Self {
        let script = Arc::new(Script::default());
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("127.0.0.1:0 can be bound");
        let base = format!(
            "http://{}",
            listener
                .local_addr()
                .expect("a bound socket has an address")
        );
        tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("the test server runs until the test ends");
        });
        Self { base, script }
    }

    fn then(&self, answer: Answer) -> &Self {
        self.script
            .answers
            .lock()
            .expect("the test server's lock is never poisoned")
            .push_back(answer);
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn received(&self) -> Vec<Received> {
        self.script
            .received
            .lock()
            .expect("the test server's lock is never poisoned")
            .clone()
    }

    fn calls(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    fn client(&self) -> ArmClient {
        self.client_with(Arc::new(StaticTokenCredential::new("test-token")))
    }

    fn client_with(&self, credential: Arc<dyn TokenCredential>) -> ArmClient {
        ArmClient::builder(credential)
            .endpoint(&self.base)
            .time_scale(0.0)
            .jitter(Arc::new(|| 0.5))
            .build()
            .expect("a 127.0.0.1 endpoint is valid")
    }
}

fn vm_id() -> ResourceId {
    ResourceId::virtual_machine(SUB, "rg", "gpu")
}

fn vm_body() -> dsinfra::azure::types::compute::VirtualMachine {
    dsinfra::azure::types::compute::VirtualMachine {
        location: "eastus".into(),
        properties: Some(VirtualMachineProperties {
            hardware_profile: Some(HardwareProfile {
                vm_size: "Standard_ND40rs_v2".into(),
            }),
            ..VirtualMachineProperties::default()
        }),
        ..Default::default()
    }
}

fn vm_json(state: &str) -> Value {
    json!({"id": vm_id().as_str(), "name": "gpu", "type": "Microsoft.Compute/virtualMachines",
           "location": "eastus",
           "properties": {"hardwareProfile": {"vmSize": "Standard_ND40rs_v2"}, "provisioningState": state}})
}

fn arm_error(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}

const OP_PATH: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/providers/Microsoft.Compute/locations/eastus/operations/op-1";

/// A millisecond hint is the server's own wall time (`dsinfra emulator` sends it next to a
/// whole-second `Retry-After`): the client sleeps it as sent whatever its time scale, so it polls
/// a compressed emulator when the operation is due, not at a hundredth of that (busy polling),
/// while `Retry-After` seconds keep scaling with the client's other waits.
#[tokio::test]
async fn a_millisecond_hint_is_slept_as_sent_at_any_time_scale() {
    let server = Server::start().await;
    let op = server.url(&format!("{OP_PATH}?api-version=2024-11-01"));
    server
        .then(
            answer(201, Some(vm_json("Creating")))
                .header("Azure-AsyncOperation", &op)
                .header("Retry-After", "1")
                .header("retry-after-ms", "400"),
        )
        .then(answer(
            200,
            Some(json!({"name": "op-1", "status": "Succeeded"})),
        ))
        .then(answer(200, Some(vm_json("Succeeded"))));
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("test-token")))
        .endpoint(&server.base)
        .time_scale(0.01)
        .build()
        .expect("valid endpoint");

    let started = Instant::now();
    client
        .put_virtual_machine(&vm_id(), &vm_body())
        .await
        .expect("the create succeeds");
    // Scaled like Retry-After, 400 ms would have been 4 ms (10 ms with the 1 s floor).
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "polled after {:?}, before the server's 400 ms",
        started.elapsed()
    );
    assert_eq!(
        server.calls().len(),
        3,
        "one poll, when the operation is due"
    );
}

#[tokio::test]
async fn put_polls_azure_async_operation_then_reads_the_resource_once() {
    let server = Server::start().await;
    let op = server.url(&format!("{OP_PATH}?api-version=2024-11-01"));
    server
        .then(
            answer(201, Some(vm_json("Creating")))
                .header("Azure-AsyncOperation", &op)
                .header("Retry-After", "10")
                .header("x-ms-request-id", "put-req"),
        )
        .then(answer(
            200,
            Some(json!({"name": "op-1", "status": "InProgress", "percentComplete": 50})),
        ))
        .then(answer(
            200,
            Some(json!({"name": "op-1", "status": "Succeeded"})),
        ))
        .then(answer(200, Some(vm_json("Succeeded"))));
    let events: Arc<Mutex<Vec<LroProgress>>> = Arc::default();
    let sink = events.clone();
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("test-token")))
        .endpoint(&server.base)
        .time_scale(0.0)
        .on_progress(Arc::new(move |p: &LroProgress| {
            sink.lock().expect("not poisoned").push(p.clone());
        }))
        .build()
        .expect("valid endpoint");

    let vm = client
        .put_virtual_machine(&vm_id(), &vm_body())
        .await
        .expect("the create succeeds");

    assert_eq!(
        vm.properties.and_then(|p| p.provisioning_state).as_deref(),
        Some("Succeeded")
    );
    let vm_path = vm_id().as_str().to_string();
    assert_eq!(
        server.calls(),
        [
            format!("PUT {vm_path}"),
            format!("GET {OP_PATH}"),
            format!("GET {OP_PATH}"),
            format!("GET {vm_path}"),
        ]
    );
    let received = server.received();
    assert_eq!(received[0].api_version(), Some("2024-11-01"));
    assert_eq!(received[3].api_version(), Some("2024-11-01"));
    assert_eq!(
        received[0].body,
        Some(
            json!({"location": "eastus", "properties": {"hardwareProfile": {"vmSize": "Standard_ND40rs_v2"}}})
        )
    );
    for r in &received {
        assert_eq!(r.authorization.as_deref(), Some("Bearer test-token"));
        assert!(
            r.user_agent
                .as_deref()
                .is_some_and(|ua| ua.starts_with("dsinfra/")),
            "{:?}",
            r.user_agent
        );
        assert!(r.client_request_id.is_some());
    }
    assert_ne!(received[0].client_request_id, received[3].client_request_id);
    let states: Vec<ProgressState> = events
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|p| p.state.clone())
        .collect();
    assert_eq!(
        states,
        [
            ProgressState::Started,
            ProgressState::Running {
                status: "InProgress".into(),
                percent_complete: Some(50.0)
            },
            ProgressState::Succeeded
        ]
    );
}

#[tokio::test]
async fn storage_put_polls_location_202_202_200_without_resending_the_put() {
    let server = Server::start().await;
    let account = ResourceId::storage_account(SUB, "rg", "dsdata01");
    let location = server.url(&format!(
        "/subscriptions/{SUB}/providers/Microsoft.Storage/operations/op-7?monitor=true&api-version=2025-01-01"
    ));
    let account_json = json!({"id": account.as_str(), "name": "dsdata01", "type": "Microsoft.Storage/storageAccounts",
        "location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS", "tier": "Standard"},
        "properties": {"provisioningState": "Succeeded",
                       "primaryEndpoints": {"blob": "https://dsdata01.blob.core.windows.net/"}}});
    server
        .then(
            answer(202, None)
                .header("Location", &location)
                .header("Retry-After", "17"),
        )
        .then(answer(202, None).header("Location", &location))
        .then(answer(200, Some(account_json.clone())))
        .then(answer(200, Some(account_json)));

    let created = server
        .client()
        .put_storage_account(
            &account,
            &StorageAccountCreate::secure_v2("eastus", StorageSkuName::StandardLrs, None),
        )
        .await
        .expect("the create succeeds");

    assert_eq!(
        created
            .properties
            .and_then(|p| p.primary_endpoints)
            .and_then(|e| e.blob)
            .as_deref(),
        Some("https://dsdata01.blob.core.windows.net/")
    );
    let op_path = format!("/subscriptions/{SUB}/providers/Microsoft.Storage/operations/op-7");
    assert_eq!(
        server.calls(),
        [
            format!("PUT {account}"),
            format!("GET {op_path}"),
            format!("GET {op_path}"),
            format!("GET {account}"),
        ]
    );
    let received = server.received();
    assert_eq!(received[0].api_version(), Some("2025-01-01"));
    // The poll URL is used exactly as ARM gave it, query included.
    assert_eq!(received[1].query, "monitor=true&api-version=2025-01-01");
}

#[tokio::test]
async fn delete_follows_location_202_then_204() {
    let server = Server::start().await;
    let nic = ResourceId::network_interface(SUB, "rg", "gpu-nic");
    let location = server.url(&format!(
        "/subscriptions/{SUB}/providers/Microsoft.Network/locations/eastus/operationResults/op-3?api-version=2024-07-01"
    ));
    server
        .then(answer(202, None).header("Location", &location))
        .then(answer(204, None));

    let outcome = server
        .client()
        .delete(&nic)
        .await
        .expect("the delete succeeds");

    assert_eq!(outcome, DeleteOutcome::Deleted);
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        (received[0].method.as_str(), received[0].api_version()),
        ("DELETE", Some("2024-07-01"))
    );
    assert_eq!(received[1].method, "GET");
}

#[tokio::test]
async fn delete_of_a_missing_resource_is_gone_but_a_missing_group_is_an_error() {
    let server = Server::start().await;
    let client = server.client();
    let nsg = ResourceId::network_security_group(SUB, "rg", "nsg");
    server.then(answer(204, None));
    assert_eq!(
        client.delete(&nsg).await.expect("204"),
        DeleteOutcome::AlreadyAbsent
    );
    server.then(answer(
        404,
        Some(arm_error(
            "ResourceNotFound",
            "The Resource 'Microsoft.Network/networkSecurityGroups/nsg' under resource group 'rg' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
        )),
    ));
    assert_eq!(
        client.delete(&nsg).await.expect("404 on the resource"),
        DeleteOutcome::AlreadyAbsent
    );
    server.then(answer(
        404,
        Some(arm_error(
            "ResourceGroupNotFound",
            "Resource group 'rg' could not be found.",
        )),
    ));
    let err = client.delete(&nsg).await.expect_err("the group is missing");
    assert!(err.is_resource_group_not_found());
    assert_eq!(
        err.to_string(),
        "ResourceGroupNotFound: Resource group 'rg' could not be found."
    );
    // Deleting the group itself: its own 404 means it is already gone.
    server.then(answer(
        404,
        Some(arm_error(
            "ResourceGroupNotFound",
            "Resource group 'rg' could not be found.",
        )),
    ));
    let group = ResourceId::resource_group(SUB, "rg");
    assert_eq!(
        client.delete(&group).await.expect("gone"),
        DeleteOutcome::AlreadyAbsent
    );
    assert_eq!(server.received()[3].api_version(), Some("2025-04-01"));
}

#[tokio::test]
async fn failed_operation_surfaces_allocation_failed_verbatim() {
    let server = Server::start().await;
    let op = server.url(&format!("{OP_PATH}?api-version=2024-11-01"));
    let message = "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance";
    server
        .then(
            answer(201, Some(vm_json("Creating")))
                .header("Azure-AsyncOperation", &op)
                .header("x-ms-request-id", "req-put-1"),
        )
        .then(answer(200, Some(json!({"status": "InProgress"}))))
        .then(answer(
            200,
            Some(json!({"name": "op-1", "status": "Failed",
                        "error": {"code": "AllocationFailed", "message": message,
                                  "details": [{"code": "Inner", "message": "zone 1"}]}})),
        ));

    let err = server
        .client()
        .put_virtual_machine(&vm_id(), &vm_body())
        .await
        .expect_err("the operation failed");

    assert!(err.is_operation_failed());
    assert_eq!(err.code(), Some("AllocationFailed"));
    assert_eq!(err.message(), Some(message));
    assert_eq!(err.details()[0].code, "Inner");
    assert_eq!(
        err.to_string(),
        format!("AllocationFailed: {message} (request id req-put-1)")
    );
    // One PUT, two polls, and no final GET after a failure.
    let calls = server.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls.iter().filter(|c| c.starts_with("PUT")).count(), 1);
}

#[tokio::test]
async fn throttled_request_waits_retry_after_then_succeeds() {
    let server = Server::start().await;
    server
        .then(
            answer(
                429,
                Some(arm_error(
                    "SubscriptionRequestsThrottled",
                    "Number of requests for subscription 'x' and operation 'GET/SUBSCRIPTIONS/RESOURCEGROUPS' exceeded the backend storage limit. Please try again after '5' seconds.",
                )),
            )
            .header("Retry-After", "5"),
        )
        .then(answer(200, Some(json!({"location": "eastus", "name": "rg"}))));
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("test-token")))
        .endpoint(&server.base)
        .time_scale(0.01)
        .build()
        .expect("valid endpoint");

    let started = Instant::now();
    let group: Option<ResourceGroup> = client
        .get(&ResourceId::resource_group(SUB, "rg"))
        .await
        .expect("the retry succeeds");

    assert_eq!(group.map(|g| g.location).as_deref(), Some("eastus"));
    let received = server.received();
    assert_eq!(received.len(), 2);
    // Retry-After 5 s at time scale 0.01 is 50 ms, and the retry keeps the request's id.
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(received[0].client_request_id, received[1].client_request_id);
}

#[tokio::test]
async fn idempotent_put_retries_two_500s() {
    let server = Server::start().await;
    server
        .then(answer(500, Some(arm_error("InternalServerError", "oops"))))
        .then(answer(503, None))
        .then(answer(
            201,
            Some(json!({"location": "eastus", "properties": {"provisioningState": "Succeeded"}})),
        ));

    let group = server
        .client()
        .put_resource_group(
            &ResourceId::resource_group(SUB, "rg"),
            &ResourceGroup::new("eastus", None),
        )
        .await
        .expect("the third attempt succeeds");

    assert_eq!(group.location, "eastus");
    assert_eq!(server.calls().len(), 3);
    assert!(server.received().iter().all(|r| r.method == "PUT"));
}

#[tokio::test]
async fn bad_request_is_not_retried_and_keeps_the_target() {
    let server = Server::start().await;
    server.then(
        answer(
            400,
            Some(json!({"error": {"code": "InvalidParameter", "message": "The value of parameter vmSize is invalid.",
                                  "target": "vmSize"}})),
        )
        .header("x-ms-correlation-request-id", "corr-42"),
    );

    let err = server
        .client()
        .put_virtual_machine(&vm_id(), &vm_body())
        .await
        .expect_err("400 fails");

    assert_eq!(server.calls().len(), 1);
    assert_eq!(
        (err.status(), err.code(), err.target()),
        (Some(400), Some("InvalidParameter"), Some("vmSize"))
    );
    assert_eq!(
        err.to_string(),
        "InvalidParameter: The value of parameter vmSize is invalid. (request id corr-42)"
    );
}

#[tokio::test]
async fn quota_conflict_is_surfaced_with_its_facts() {
    let server = Server::start().await;
    let message = "Operation could not be completed as it results in exceeding approved standardNDSv2Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40.";
    server.then(
        answer(409, Some(arm_error("OperationNotAllowed", message)))
            .header("x-ms-request-id", "q-1"),
    );

    let err = server
        .client()
        .put_virtual_machine(&vm_id(), &vm_body())
        .await
        .expect_err("409 fails");

    assert_eq!(
        err.to_string(),
        format!("OperationNotAllowed: {message} (request id q-1)")
    );
    let facts = err.quota_facts().expect("quota facts parse");
    assert_eq!(
        (facts.family.as_str(), facts.new_limit_required),
        ("standardNDSv2Family", Some(40))
    );
    assert_eq!(server.calls().len(), 1);
}

#[tokio::test]
async fn post_action_is_not_retried_on_500_unless_idempotent() {
    let server = Server::start().await;
    let client = server.client();
    server.then(answer(500, Some(arm_error("InternalServerError", "boom"))));
    let err = client
        .vm_action(&vm_id(), VmAction::Restart)
        .await
        .expect_err("restart is not idempotent: no retry");
    assert_eq!(err.status(), Some(500));
    assert_eq!(server.calls(), [format!("POST {}/restart", vm_id())]);

    let op = server.url(&format!("{OP_PATH}?api-version=2024-11-01"));
    server
        .then(answer(500, None))
        .then(
            answer(202, None)
                .header("Azure-AsyncOperation", &op)
                .header("Location", server.url("/ignored")),
        )
        .then(answer(200, Some(json!({"status": "Succeeded"}))));
    client
        .vm_action(&vm_id(), VmAction::Deallocate)
        .await
        .expect("deallocate is idempotent: retried, then polled");
    let calls = server.calls();
    assert_eq!(
        calls[1..],
        [
            format!("POST {}/deallocate", vm_id()),
            format!("POST {}/deallocate", vm_id()),
            format!("GET {OP_PATH}"),
        ]
    );
    assert_eq!(server.received()[1].api_version(), Some("2024-11-01"));
}

/// Hands out `token-1`, `token-2`, ... and counts calls.
#[derive(Debug, Default)]
struct Rotating(AtomicU32);

impl TokenCredential for Rotating {
    fn get_token<'a>(&'a self, _scope: &'a str) -> TokenFuture<'a> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            Ok(AccessToken {
                token: Secret::new(format!("token-{n}")),
                expires_on: None,
            })
        })
    }
}

#[tokio::test]
async fn expired_token_is_refreshed_once() {
    let server = Server::start().await;
    let expired = || {
        answer(
            401,
            Some(arm_error(
                "ExpiredAuthenticationToken",
                "The access token expiry UTC time '5/13/2024 6:05:58 PM' is earlier than current UTC time '5/13/2024 6:10:00 PM'.",
            )),
        )
    };
    let credential = Arc::new(Rotating::default());
    let client = server.client_with(credential.clone());
    server
        .then(expired())
        .then(answer(200, Some(json!({"location": "eastus"}))));

    let group: Option<ResourceGroup> = client
        .get(&ResourceId::resource_group(SUB, "rg"))
        .await
        .expect("the refreshed token works");

    assert!(group.is_some());
    let auth: Vec<Option<String>> = server
        .received()
        .into_iter()
        .map(|r| r.authorization)
        .collect();
    assert_eq!(
        auth,
        [Some("Bearer token-1".into()), Some("Bearer token-2".into())]
    );

    // A second expiry inside the same request is not refreshed again.
    server.then(expired()).then(expired());
    let err = client
        .get::<ResourceGroup>(&ResourceId::resource_group(SUB, "rg"))
        .await
        .expect_err("one refresh only");
    assert_eq!(err.code(), Some("ExpiredAuthenticationToken"));
    assert_eq!(server.received().len(), 4);
    assert_eq!(credential.0.load(Ordering::SeqCst), 3);
    assert!(
        !format!("{err:?} {err}").contains("token-"),
        "tokens never reach errors"
    );
}

#[tokio::test]
async fn get_maps_404_to_none_and_list_follows_next_link() {
    let server = Server::start().await;
    let client = server.client();
    server.then(answer(
        404,
        Some(arm_error(
            "ResourceNotFound",
            "The Resource 'Microsoft.Compute/virtualMachines/gpu' under resource group 'rg' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
        )),
    ));
    let vm: Option<dsinfra::azure::types::compute::VirtualMachine> = client
        .get(&vm_id())
        .await
        .expect("404 is not an error for get");
    assert!(vm.is_none());

    let next = server.url(&format!(
        "/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages?api-version=2024-11-01&$skiptoken=2"
    ));
    let usage = |family: &str, current: i64| json!({"unit": "Count", "currentValue": current, "limit": 100, "name": {"value": family}});
    server
        .then(answer(
            200,
            Some(json!({"value": [usage("cores", 10)], "nextLink": next})),
        ))
        .then(answer(
            200,
            Some(json!({"value": [usage("standardNDSv2Family", 40)]})),
        ));
    let usages = client
        .compute_usages(SUB, "eastus")
        .await
        .expect("two pages");
    let families: Vec<&str> = usages.iter().map(|u| u.name.value.as_str()).collect();
    assert_eq!(families, ["cores", "standardNDSv2Family"]);
    let received = server.received();
    assert_eq!(received[1].api_version(), Some("2024-11-01"));
    assert!(received[2].query.contains("skiptoken=2"));
}

#[tokio::test]
async fn skus_are_filtered_by_location_at_their_own_api_version() {
    let server = Server::start().await;
    server.then(answer(
        200,
        Some(json!({"value": [{"name": "Standard_ND40rs_v2", "locations": ["eastus"]}]})),
    ));
    let skus = server
        .client()
        .compute_skus(SUB, "eastus")
        .await
        .expect("lists");
    assert_eq!(skus[0].name.as_deref(), Some("Standard_ND40rs_v2"));
    let received = &server.received()[0];
    assert_eq!(received.api_version(), Some("2021-07-01"));
    assert!(
        received
            .query
            .contains("%24filter=location+eq+%27eastus%27"),
        "{}",
        received.query
    );
}

#[tokio::test]
async fn storage_keys_are_read_and_never_printed() {
    let server = Server::start().await;
    server.then(answer(
        200,
        Some(
            json!({"keys": [{"keyName": "key1", "permissions": "Full", "value": "a2V5LW9uZQ=="}]}),
        ),
    ));
    let account = ResourceId::storage_account(SUB, "rg", "dsdata01");
    let keys = server
        .client()
        .list_storage_keys(&account)
        .await
        .expect("listKeys");
    assert_eq!(keys.key("key1").map(Secret::expose), Some("a2V5LW9uZQ=="));
    assert!(!format!("{keys:?}").contains("a2V5"));
    assert_eq!(server.calls(), [format!("POST {account}/listKeys")]);
    assert_eq!(server.received()[0].content_length.as_deref(), Some("0"));
}

#[tokio::test]
async fn low_rate_limit_headers_turn_on_the_slow_down_signal() {
    let server = Server::start().await;
    server.then(
        answer(200, Some(json!({"location": "eastus"})))
            .header("x-ms-ratelimit-remaining-subscription-reads", "3"),
    );
    let client = server.client();
    assert!(!client.is_slowing_down());
    let _: Option<ResourceGroup> = client
        .get(&ResourceId::resource_group(SUB, "rg"))
        .await
        .expect("reads");
    assert!(client.is_slowing_down());
}

#[tokio::test]
async fn poll_urls_on_another_origin_never_get_the_token() {
    let server = Server::start().await;
    server.then(answer(202, None).header("Location", "http://169.254.169.254/steal?api-version=1"));
    let err = server
        .client()
        .delete(&ResourceId::disk(SUB, "rg", "data"))
        .await
        .expect_err("a foreign poll URL is refused");
    assert!(err.is_usage());
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to send the ARM token to http://169.254.169.254 (the endpoint is {})",
            server.base
        )
    );
    assert_eq!(server.calls().len(), 1);
}

#[tokio::test]
async fn a_next_link_on_another_origin_never_gets_the_token() {
    let server = Server::start().await;
    server.then(answer(
        200,
        Some(json!({"value": [], "nextLink": "http://169.254.169.254/steal?$skiptoken=1"})),
    ));
    let err = server
        .client()
        .compute_usages(SUB, "eastus")
        .await
        .expect_err("a foreign nextLink is refused");
    assert!(err.is_usage());
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to send the ARM token to http://169.254.169.254 (the endpoint is {})",
            server.base
        )
    );
    assert_eq!(
        server.calls().len(),
        1,
        "the foreign page is never requested"
    );
}

#[tokio::test]
async fn policies_can_turn_retries_off() {
    let server = Server::start().await;
    server
        .then(answer(503, None))
        .then(answer(200, Some(json!({"location": "eastus"}))));
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("t")))
        .endpoint(&server.base)
        .retry_policy(RetryPolicy::none())
        .time_scale(0.0)
        .build()
        .expect("valid endpoint");
    let err = client
        .get::<ResourceGroup>(&ResourceId::resource_group(SUB, "rg"))
        .await
        .expect_err("no retries");
    assert_eq!(err.status(), Some(503));
    assert_eq!(
        err.to_string(),
        format!("HTTP 503 from GET /subscriptions/{SUB}/resourceGroups/rg")
    );
}

/// Issue 17: the nodes of an AmlCompute are read with `POST .../listNodes` (retried like a read)
/// and every page after it with a GET of `nextLink`, at the Machine Learning api-version.
#[tokio::test]
async fn aml_nodes_are_listed_with_a_post_and_their_next_pages_followed() {
    let server = Server::start().await;
    let client = server.client();
    let compute_id = format!(
        "/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/ws/computes/scratch"
    );
    let mut state = dsinfra::state::State::new("exp");
    state.upsert(dsinfra::state::ResourceState {
        address: "aml_cluster.scratch.compute".parse().expect("valid"),
        kind: dsinfra::model::ResourceKind::MlCompute,
        name: "scratch".into(),
        parent: Some("ws".into()),
        resource_group: "rg".into(),
        id: Some(compute_id.clone()),
        attrs: dsinfra::model::Attrs::new(),
        depends_on: std::collections::BTreeSet::new(),
        status: dsinfra::state::ResourceStatus::Created,
        power_state: None,
        secrets: std::collections::BTreeMap::new(),
        host_key: None,
        boots: 0,
        steps: std::collections::BTreeMap::new(),
        mesh_key: None,
        nodes: std::collections::BTreeMap::new(),
        drift: None,
    });
    let node = |id: &str, port: u16| {
        json!({"nodeId": id, "privateIpAddress": "10.0.0.4", "publicIpAddress": "20.1.2.3",
               "port": port, "nodeState": "idle", "runId": null})
    };
    let next = server.url(&format!(
        "{compute_id}/listNodes?api-version=2024-10-01&$skiptoken=1"
    ));
    server
        .then(answer(
            500,
            Some(arm_error("InternalServerError", "try again")),
        ))
        .then(answer(
            200,
            Some(json!({"nodes": [node("tvmps_b", 50001)], "nextLink": next})),
        ))
        .then(answer(
            200,
            Some(json!({"nodes": [node("tvmps_a", 50000)]})),
        ));
    let found = dsinfra::engine::reach::read_aml_nodes(&client, &state)
        .await
        .expect("listed");
    let nodes = &found[&"aml_cluster.scratch.compute".parse().expect("valid")];
    let ids: Vec<(&str, Option<u16>)> =
        nodes.iter().map(|n| (n.node_id.as_str(), n.port)).collect();
    assert_eq!(ids, [("tvmps_b", Some(50001)), ("tvmps_a", Some(50000))]);
    assert_eq!(
        server.calls(),
        [
            format!("POST {compute_id}/listNodes"),
            format!("POST {compute_id}/listNodes"),
            format!("GET {compute_id}/listNodes"),
        ]
    );
    let received = server.received();
    assert_eq!(received[0].api_version(), Some("2024-10-01"));
    assert!(received[2].query.contains("skiptoken=1"));
}
