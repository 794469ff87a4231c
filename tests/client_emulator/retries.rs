//! What the client waits out or repairs: throttling, server errors, expired tokens, pacing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use dsinfra::azure::credential::TokenFuture;
use dsinfra::azure::types::compute::{PowerState, VmAction};
use dsinfra::azure::types::network::{NetworkSecurityGroup, VirtualNetwork};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::{
    AccessToken, ArmClient, ResourceId, Secret, StaticTokenCredential, TokenCredential,
};
use dsinfra::emulator::{BucketShape, ComputeLimits, EmulatorConfig, FaultAction, FaultRule};

use crate::harness::{
    Exchange, LOCATION, SUB, env, env_with, group, is_operation_status, network, power_state,
    vm_body, vnet_body,
};

#[tokio::test]
async fn a_throttling_storm_is_waited_out_with_every_attempt_visible() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    env.client
        .put_resource_group(&group("rg-storm"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    let storm = |count| FaultRule {
        method: Some("PUT".into()),
        path: None,
        resource_type: Some("Microsoft.Network/networkSecurityGroups".into()),
        count: Some(count),
        action: FaultAction::Respond {
            status: 429,
            code: "SubscriptionRequestsThrottled".into(),
            message: "Number of 'write' requests for subscription exceeded.".into(),
            retry_after: Some(2),
        },
    };
    env.handle.add_fault(storm(3));
    let nsg = ResourceId::network_security_group(SUB, "rg-storm", "nsg");
    let body = NetworkSecurityGroup {
        location: Some(LOCATION.into()),
        ..NetworkSecurityGroup::default()
    };
    let started = std::time::Instant::now();
    env.client
        .put_network_security_group(&nsg, &body)
        .await
        .expect("the storm passes");
    // Three refusals, then the accepted PUT: four attempts, each visible on the wire.
    assert_eq!(env.statuses("PUT", &nsg), [429, 429, 429, 201]);
    // Each wait honoured Retry-After (2 s scaled by 0.01 = 20 ms).
    assert!(started.elapsed() >= std::time::Duration::from_millis(60));

    // A storm longer than the retry budget (5 attempts) surfaces ARM's 429 verbatim.
    env.handle.add_fault(storm(5));
    let other = ResourceId::network_security_group(SUB, "rg-storm", "nsg2");
    let err = env
        .client
        .put_network_security_group(&other, &body)
        .await
        .expect_err("the budget runs out");
    assert!(err.is_throttled());
    assert_eq!(err.code(), Some("SubscriptionRequestsThrottled"));
    assert_eq!(
        err.message(),
        Some("Number of 'write' requests for subscription exceeded.")
    );
    assert_eq!(env.statuses("PUT", &other), [429; 5]);
    env.assert_conformant();
}

#[tokio::test]
async fn server_errors_on_a_read_are_retried() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    env.client
        .put_resource_group(&group("rg-500"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    let vnet = ResourceId::virtual_network(SUB, "rg-500", "vnet");
    env.client
        .put_virtual_network(&vnet, &vnet_body(None))
        .await
        .expect("vnet created");
    let before = env.statuses("GET", &vnet).len();
    env.handle.add_fault(FaultRule {
        method: Some("GET".into()),
        path: Some("*/virtualNetworks/vnet".into()),
        resource_type: None,
        count: Some(2),
        action: FaultAction::Respond {
            status: 500,
            code: "InternalServerError".into(),
            message: "Encountered internal server error. Diagnostic information: timestamp \
                      '20261122T061000Z'."
                .into(),
            retry_after: None,
        },
    });
    let read = env
        .client
        .get::<VirtualNetwork>(&vnet)
        .await
        .expect("the read recovers")
        .expect("the vnet exists");
    assert_eq!(read.name.as_deref(), Some("vnet"));
    assert_eq!(env.statuses("GET", &vnet)[before..], [500, 500, 200]);
    env.assert_conformant();
}

/// A credential that mints a new token on every call, as a real identity does after expiry.
#[derive(Debug, Default)]
struct MintingCredential {
    calls: AtomicU32,
}

impl TokenCredential for MintingCredential {
    fn get_token<'a>(&'a self, _scope: &'a str) -> TokenFuture<'a> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(AccessToken {
                token: Secret::new(format!("minted-token-{n}")),
                expires_on: None,
            })
        })
    }
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once_and_the_run_continues() {
    let credential = Arc::new(MintingCredential::default());
    let Some(env) = env_with(EmulatorConfig::default(), Arc::clone(&credential) as _).await else {
        return;
    };
    let rg = group("rg-token");
    env.client
        .put_resource_group(&rg, &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    assert_eq!(
        credential.calls.load(Ordering::SeqCst),
        1,
        "one token so far"
    );
    env.handle.expire_tokens();
    let vnet = ResourceId::virtual_network(SUB, "rg-token", "vnet");
    env.client
        .put_virtual_network(&vnet, &vnet_body(None))
        .await
        .expect("the client refreshes and carries on");
    assert_eq!(
        credential.calls.load(Ordering::SeqCst),
        2,
        "exactly one refresh"
    );
    // The expired attempt was answered 401 and repeated once with the new token.
    assert_eq!(env.statuses("PUT", &vnet)[..2], [401, 201]);
    env.assert_conformant();
}

#[tokio::test]
async fn a_token_that_stays_expired_fails_after_one_refresh() {
    // A static credential hands back the same token, which the emulator keeps refusing: the
    // client must refresh once, then report ARM's 401 rather than loop.
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let rg = group("rg-stale");
    env.client
        .put_resource_group(&rg, &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    env.handle.expire_tokens();
    let err = env
        .client
        .get::<ResourceGroup>(&rg)
        .await
        .expect_err("the token stays expired");
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.code(), Some("ExpiredAuthenticationToken"));
    assert!(err.is_auth());
    assert!(
        err.message()
            .is_some_and(|m| m.starts_with("The access token expiry UTC time '")),
        "{:?}",
        err.message()
    );
    assert!(!err.to_string().contains("emulator-token"));
    assert_eq!(env.statuses("GET", &rg), [401, 401]);
    env.assert_conformant();
}

#[tokio::test]
async fn the_client_slows_down_before_the_emulator_throttles_writes() {
    let Some(env) = env(EmulatorConfig {
        latency_scale: 0.0,
        ..EmulatorConfig::default()
    })
    .await
    else {
        return;
    };
    // Pacing waits are real time here, as the emulator's buckets refill in real time.
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("pacing")))
        .endpoint(env.handle.endpoint())
        .build()
        .expect("client");
    let rg = group("rg-pacing");
    let body = ResourceGroup::new(LOCATION, None);
    let mut writes = 0;
    // ARM's subscription write bucket holds 200; the pacer engages below 10 % of it.
    while !client.is_slowing_down() {
        client.put_resource_group(&rg, &body).await.expect("write");
        writes += 1;
        assert!(writes < 400, "the pacer never engaged");
    }
    assert!(
        writes >= 150,
        "the pacer engaged after only {writes} writes"
    );
    for _ in 0..15 {
        client
            .put_resource_group(&rg, &body)
            .await
            .expect("paced write");
    }
    let statuses = env.statuses("PUT", &rg);
    assert_eq!(statuses.len(), writes + 15);
    assert!(
        !statuses.contains(&429),
        "the client ran into ARM's throttle instead of slowing down"
    );
    env.assert_conformant();
}

#[tokio::test]
async fn a_token_expiring_while_an_operation_is_polled_is_refreshed_and_polling_resumes() {
    let credential = Arc::new(MintingCredential::default());
    let Some(env) = env_with(EmulatorConfig::default(), Arc::clone(&credential) as _).await else {
        return;
    };
    let nic = network(&env.client, "rg-midrun").await;
    let vm = ResourceId::virtual_machine(SUB, "rg-midrun", "trainer");
    let put = {
        let client = env.client.clone();
        let vm = vm.clone();
        let body = vm_body("Standard_D2s_v5", &nic, None, None);
        tokio::spawn(async move { client.put_virtual_machine(&vm, &body).await })
    };
    // Wait until the PUT has been accepted and the client is polling (the VM takes 0.9 s).
    while env.statuses("PUT", &vm).is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    env.handle.expire_tokens();
    let created = put
        .await
        .expect("the task completes")
        .expect("the operation completes after one refresh");
    assert_eq!(
        created
            .properties
            .and_then(|p| p.provisioning_state)
            .as_deref(),
        Some("Succeeded")
    );
    assert_eq!(
        credential.calls.load(Ordering::SeqCst),
        2,
        "exactly one refresh"
    );
    let expired: Vec<Exchange> = env
        .exchanges()
        .into_iter()
        .filter(|e| e.status == 401)
        .collect();
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].method, "GET", "the poll met the expiry");
    // The PUT itself was never re-sent.
    assert_eq!(env.statuses("PUT", &vm), [201]);
    env.assert_conformant();
}

#[tokio::test]
async fn server_errors_while_polling_an_operation_are_retried() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    env.client
        .put_resource_group(&group("rg-poll"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    env.handle.add_fault(FaultRule {
        method: Some("GET".into()),
        path: Some("*/operations/*".into()),
        resource_type: None,
        count: Some(2),
        action: FaultAction::Respond {
            status: 503,
            code: "ServiceUnavailable".into(),
            message: "The service is temporarily unavailable.".into(),
            retry_after: Some(1),
        },
    });
    let vnet = ResourceId::virtual_network(SUB, "rg-poll", "vnet");
    env.client
        .put_virtual_network(&vnet, &vnet_body(None))
        .await
        .expect("the operation completes despite failed status reads");
    let polls: Vec<u16> = env
        .exchanges()
        .into_iter()
        .filter(|e| e.method == "GET" && is_operation_status(&e.path))
        .map(|e| e.status)
        .collect();
    assert_eq!(polls[..2], [503, 503], "{polls:?}");
    assert_eq!(polls.last(), Some(&200));
    assert!(env.handle.faults().is_empty(), "both failures were served");
    assert_eq!(env.statuses("PUT", &vnet), [201]);
    env.assert_conformant();
}

#[tokio::test]
async fn a_failed_power_action_is_retried_only_when_repeating_it_is_harmless() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let nic = network(&env.client, "rg-actions").await;
    let vm = ResourceId::virtual_machine(SUB, "rg-actions", "trainer");
    env.client
        .put_virtual_machine(&vm, &vm_body("Standard_D2s_v5", &nic, None, None))
        .await
        .expect("vm created");
    let server_error = |action: &str| FaultRule {
        method: Some("POST".into()),
        path: Some(format!("*/virtualMachines/trainer/{action}")),
        resource_type: None,
        count: Some(1),
        action: FaultAction::Respond {
            status: 500,
            code: "InternalServerError".into(),
            message: "An internal execution error occurred.".into(),
            retry_after: None,
        },
    };
    // Restart reboots again if repeated: a 500 is reported, not retried.
    env.handle.add_fault(server_error("restart"));
    let err = env
        .client
        .vm_action(&vm, VmAction::Restart)
        .await
        .expect_err("restart is not retried");
    assert_eq!(err.status(), Some(500));
    assert_eq!(err.code(), Some("InternalServerError"));
    assert_eq!(env.statuses("POST", &vm.join("restart")), [500]);
    // Deallocate ends in the same state however often it runs: the 500 is retried.
    env.handle.add_fault(server_error("deallocate"));
    env.client
        .vm_action(&vm, VmAction::Deallocate)
        .await
        .expect("deallocate is retried");
    assert_eq!(env.statuses("POST", &vm.join("deallocate")), [500, 202]);
    assert_eq!(
        power_state(&env.client, &vm).await,
        Some(PowerState::Deallocated)
    );
    env.assert_conformant();
}

/// An emulator whose VMs take 2 updates refilled `refill_per_minute`, and a running VM in it.
/// A restart takes 30 s of Azure's time, so a bucket refilled slower than one token per 30 s
/// runs dry when restarts follow each other.
async fn small_vm_update_limit(
    rg: &str,
    refill_per_minute: f64,
) -> Option<(crate::harness::Env, ResourceId)> {
    let env = env(EmulatorConfig {
        compute_limits: ComputeLimits {
            per_vm: BucketShape {
                capacity: 2,
                refill_per_minute,
            },
            ..ComputeLimits::default()
        },
        ..EmulatorConfig::default()
    })
    .await?;
    let nic = network(&env.client, rg).await;
    let vm = ResourceId::virtual_machine(SUB, rg, "trainer");
    env.client
        .put_virtual_machine(&vm, &vm_body("Standard_D2s_v5", &nic, None, None))
        .await
        .expect("VM created");
    Some((env, vm))
}

fn restarts(env: &crate::harness::Env, vm: &ResourceId) -> Vec<u16> {
    let path = format!("{}/restart", vm.as_str());
    env.exchanges()
        .into_iter()
        .filter(|e| e.method == "POST" && e.path == path)
        .map(|e| e.status)
        .collect()
}

#[tokio::test]
async fn computes_per_vm_429_is_waited_out_and_a_restart_is_retried_because_nothing_ran() {
    // One token every 150 s: the fourth restart finds the bucket empty.
    let Some((env, vm)) = small_vm_update_limit("rg-vm-limit", 0.4).await else {
        return;
    };
    // Pacing off: the client meets the limit and must honour Compute's 429.
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("no-pacing")))
        .endpoint(env.handle.endpoint())
        .time_scale(crate::harness::CLIENT_TIME_SCALE)
        .pacing_threshold(0.0)
        .jitter(Arc::new(|| 0.5))
        .build()
        .expect("client");
    for _ in 0..4 {
        // A restart is not idempotent, yet a 429 is retried: Compute refused it before acting.
        client
            .vm_action(&vm, VmAction::Restart)
            .await
            .expect("the restart completes");
    }
    let statuses = restarts(&env, &vm);
    assert_eq!(
        statuses.iter().filter(|&&s| s == 202).count(),
        4,
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&429),
        "the fourth restart should have met the VM's limit: {statuses:?}"
    );
    assert_eq!(
        power_state(&env.client, &vm).await,
        Some(PowerState::Running)
    );
    env.assert_conformant();
}

#[tokio::test]
async fn the_client_slows_down_before_computes_per_vm_limit() {
    // Compute's shape (a third of the capacity a minute: one token every 90 s), which the pacer
    // assumes: restarts every 30 s would empty it by the third or fourth.
    let Some((env, vm)) = small_vm_update_limit("rg-vm-pacing", 2.0 / 3.0).await else {
        return;
    };
    for _ in 0..5 {
        env.client
            .vm_action(&vm, VmAction::Restart)
            .await
            .expect("the restart completes");
    }
    let statuses = restarts(&env, &vm);
    assert_eq!(statuses, [202; 5], "the client ran into Compute's VM limit");
    env.assert_conformant();
}

/// Regression: a Retry-After longer than the client waits out (2 minutes) used to be cut to
/// 2 minutes and retried early, which Compute refuses again, five times over. Now the client
/// stops at the first such 429 and says how long Azure asked to wait, why, and until when.
#[tokio::test]
async fn a_wait_longer_than_the_client_waits_out_stops_at_once_and_says_until_when() {
    // One token every 1200 s, as Compute's slowest per-VM policies: the third restart is
    // refused with a Retry-After far above the client's 120 s.
    let Some((env, vm)) = small_vm_update_limit("rg-vm-long-wait", 0.05).await else {
        return;
    };
    let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("no-pacing")))
        .endpoint(env.handle.endpoint())
        .time_scale(crate::harness::CLIENT_TIME_SCALE)
        .pacing_threshold(0.0)
        .jitter(Arc::new(|| 0.5))
        .build()
        .expect("client");
    for _ in 0..2 {
        client
            .vm_action(&vm, VmAction::Restart)
            .await
            .expect("the bucket still has a token");
    }
    let before = chrono::Utc::now();
    let err = client
        .vm_action(&vm, VmAction::Restart)
        .await
        .expect_err("the VM's update bucket is empty for far longer than 2 minutes");
    // One refusal on the wire, no early retry.
    assert_eq!(restarts(&env, &vm), [202, 202, 429]);
    assert!(err.is_throttled(), "{err}");
    assert_eq!(err.throttle_policy(), Some("UpdateVMResource"));
    let wait = err.throttle_wait().expect("the client says why it stopped");
    assert!(
        wait.wait > std::time::Duration::from_mins(2),
        "{:?}",
        wait.wait
    );
    assert_eq!(wait.limit, std::time::Duration::from_mins(2));
    // The wall-clock end of the wait is the emulator's (compressed) time ahead.
    assert!(wait.until > before, "{:?} <= {before:?}", wait.until);
    let text = err.to_string();
    assert!(
        text.starts_with("OperationNotAllowed: The server rejected the request because too many requests have been received for this subscription."),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "; Azure asks to wait {} s (policy UpdateVMResource), longer than dsinfra waits between retries (120 s), so it stopped without retrying: nothing was done by this request, which can be sent again after ",
            wait.wait.as_secs()
        )),
        "{text}"
    );
    assert_eq!(
        power_state(&env.client, &vm).await,
        Some(PowerState::Running)
    );
    env.assert_conformant();
}
