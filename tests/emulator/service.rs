//! What every request goes through: bearer tokens, request ids and rate-limit headers,
//! throttling, fault injection (handle, HTTP, file), persistence across restarts, the latency
//! scale, SSH endpoints and the admin API.

use super::*;

#[tokio::test]
async fn bearer_tokens_are_required_and_can_expire() {
    let env = env(EmulatorConfig {
        required_token: Some("the-token".into()),
        ..fast()
    })
    .await;
    let url = with_version(&rg_path("rg"), RESOURCES);
    let missing = env.send("GET", &url, None, None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.code(), "AuthenticationFailed");
    assert_eq!(
        missing.message(),
        "Authentication failed. The 'Authorization' header is missing."
    );
    assert!(
        missing
            .header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer "))
    );
    assert!(missing.header("x-ms-request-id").is_some());
    let wrong = env.send("GET", &url, None, Some("other")).await;
    assert_eq!(
        (wrong.status, wrong.code()),
        (401, "InvalidAuthenticationToken")
    );
    let ok = env.send("GET", &url, None, Some("the-token")).await;
    assert_eq!(
        ok.code(),
        "ResourceGroupNotFound",
        "a good token reaches ARM"
    );

    let open = self::env(fast()).await;
    let url = with_version(&rg_path("rg"), RESOURCES);
    assert_eq!(open.send("GET", &url, None, Some("any")).await.status, 404);
    open.handle.expire_tokens();
    let expired = open.send("GET", &url, None, Some("any")).await;
    assert_eq!(expired.status, 401);
    assert_eq!(expired.code(), "ExpiredAuthenticationToken");
    assert!(
        expired
            .message()
            .starts_with("The access token expiry UTC time '"),
        "{}",
        expired.message()
    );
    assert!(
        expired
            .message()
            .contains("' is earlier than current UTC time '")
    );
    assert_eq!(
        open.send("GET", &url, None, Some("fresh")).await.status,
        404,
        "a new token works"
    );
    let admin = open
        .http
        .post(format!(
            "{}/_emulator/tokens/expire",
            open.handle.endpoint()
        ))
        .send()
        .await
        .expect("admin call");
    assert_eq!(admin.status().as_u16(), 204);
    assert_eq!(
        open.send("GET", &url, None, Some("fresh")).await.code(),
        "ExpiredAuthenticationToken"
    );
}

#[tokio::test]
async fn every_response_has_request_id_and_rate_limit_headers_and_bursts_throttle() {
    let env = env(fast()).await;
    let first = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert!(
        first
            .header("x-ms-request-id")
            .is_some_and(|id| id.len() == 36)
    );
    assert_eq!(
        first.header("x-ms-ratelimit-remaining-subscription-writes"),
        Some("199")
    );
    let read = env.get(&rg_path("rg"), RESOURCES).await;
    assert_eq!(
        read.header("x-ms-ratelimit-remaining-subscription-reads"),
        Some("249")
    );
    let delete = env
        .delete(&res("rg", "Microsoft.Network/virtualNetworks/none"), NET)
        .await;
    assert_eq!(
        delete.header("x-ms-ratelimit-remaining-subscription-deletes"),
        Some("199")
    );
    let missing_version = env.send("GET", &rg_path("rg"), None, Some("t")).await;
    assert_eq!(
        (missing_version.status, missing_version.code()),
        (400, "MissingApiVersionParameter")
    );

    // At latency scale 0 the write bucket refills in real time (10 tokens a second), so a slow
    // machine lets a few more writes through the burst: the bound follows the burst's duration.
    let burst = std::time::Instant::now();
    let mut throttled = None;
    for i in 0..400 {
        let resp = env
            .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await;
        if resp.status == 429 {
            throttled = Some((i, resp));
            break;
        }
    }
    let (i, resp) = throttled.expect("a burst beyond 200 writes is throttled");
    let refilled = (burst.elapsed().as_secs_f64() * 10.0).ceil();
    assert!(
        (195.0..=200.0 + refilled).contains(&f64::from(i)),
        "throttled after about 200 writes (+{refilled} refilled during the burst), at {i}"
    );
    assert_eq!(resp.code(), "SubscriptionRequestsThrottled");
    assert!(
        resp.header("retry-after")
            .is_some_and(|r| r.parse::<u64>().is_ok_and(|s| s >= 1))
    );
    assert_eq!(
        resp.header("x-ms-ratelimit-remaining-subscription-writes"),
        Some("0")
    );
    assert!(resp.header("x-ms-request-id").is_some());
    // Reads have their own bucket.
    assert_eq!(env.get(&rg_path("rg"), RESOURCES).await.status, 200);
    // Another subscription too.
    assert_eq!(
        env.put(
            "/subscriptions/sub2/resourceGroups/rg",
            RESOURCES,
            &json!({"location": "eastus"})
        )
        .await
        .status,
        201
    );
}

#[tokio::test]
async fn faults_from_the_handle_fail_the_next_n_matching_requests() {
    let env = env(fast()).await;
    env.group("rg").await;
    env.handle.add_fault(FaultRule::respond(
        "PUT",
        "Microsoft.Network/virtualNetworks",
        2,
        &emulator::ArmError::new(
            500,
            "InternalServerError",
            "Encountered internal server error.",
        ),
    ));
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/v");
    let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    assert_eq!(env.get(&vnet, NET).await.status, 404, "GETs do not match");
    for _ in 0..2 {
        let failed = env.put(&vnet, NET, &body).await;
        assert_eq!((failed.status, failed.code()), (500, "InternalServerError"));
        assert!(failed.header("x-ms-request-id").is_some());
    }
    assert_eq!(env.put(&vnet, NET, &body).await.status, 201);
    assert!(env.handle.faults().is_empty());

    // AllocationFailed inside the long-running operation.
    env.network("rg2").await;
    env.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/*".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 409,
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.".into(),
        },
    });
    let vm = env.vm("rg2", "vm", "Standard_D4s_v5").await;
    assert_eq!(vm.status, 201, "accepted first");
    let status = env
        .poll_status(vm.header("azure-asyncoperation").expect("async"))
        .await;
    assert_eq!(status["status"], "Failed");
    assert_eq!(status["error"]["code"], "AllocationFailed");
    let got = env
        .get(
            &format!(
                "{}?$expand=instanceView",
                res("rg2", "Microsoft.Compute/virtualMachines/vm")
            ),
            COMPUTE,
        )
        .await;
    assert_eq!(got.body["properties"]["provisioningState"], "Failed");
    assert_eq!(
        got.body["properties"]["instanceView"]["statuses"][0]["code"],
        "ProvisioningState/failed/AllocationFailed"
    );
    assert!(
        env.handle.faults().is_empty(),
        "the async fault was consumed"
    );
}

#[tokio::test]
async fn faults_over_http_make_429_storms_and_delays() {
    let env = env(fast()).await;
    let admin = format!("{}/_emulator/faults", env.handle.endpoint());
    let added = env.http.post(&admin).json(&json!([
        {"method": "GET", "count": 3, "action": {"kind": "respond", "status": 429, "code": "TooManyRequests",
          "message": "Too many requests.", "retry_after": 2}},
        {"method": "PUT", "count": 1, "action": {"kind": "delay", "millis": 150}},
    ])).send().await.expect("admin reachable");
    assert_eq!(added.status().as_u16(), 201);
    for _ in 0..3 {
        let storm = env.get(&rg_path("rg"), RESOURCES).await;
        assert_eq!(storm.status, 429);
        assert_eq!(storm.code(), "TooManyRequests");
        assert_eq!(storm.header("retry-after"), Some("2"));
    }
    assert_eq!(env.get(&rg_path("rg"), RESOURCES).await.status, 404);
    let started = std::time::Instant::now();
    assert_eq!(
        env.put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await
            .status,
        201
    );
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "delay applied"
    );
    let listed: Value = env
        .http
        .get(&admin)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["value"], json!([]));
    let expire = env
        .http
        .post(&admin)
        .json(&json!({"action": {"kind": "expire_token"}}))
        .send()
        .await
        .expect("admin");
    assert_eq!(expire.status().as_u16(), 201);
    assert_eq!(
        env.get(&rg_path("rg"), RESOURCES).await.code(),
        "ExpiredAuthenticationToken"
    );
    let bad = env
        .http
        .post(&admin)
        .json(&json!({"action": {"kind": "nonsense"}}))
        .send()
        .await
        .expect("admin");
    assert_eq!(bad.status().as_u16(), 400);
}

#[tokio::test]
async fn faults_load_from_a_file_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("faults.json");
    std::fs::write(&file, r#"[{"resource_type": "Microsoft.Resources/resourceGroups", "method": "PUT",
        "action": {"kind": "respond", "status": 503, "code": "ServiceUnavailable", "message": "Try later."}}]"#)
        .expect("write faults");
    let env = env(EmulatorConfig {
        faults_file: Some(file),
        ..fast()
    })
    .await;
    let failed = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!(
        (failed.status, failed.code(), failed.message()),
        (503, "ServiceUnavailable", "Try later.")
    );
    assert_eq!(
        env.put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn state_survives_a_restart_including_pending_operations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmulatorConfig {
        state_dir: Some(dir.path().to_owned()),
        latency_scale: 0.02,
        ..EmulatorConfig::default()
    };
    let first = env(config.clone()).await;
    first.group("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/persisted01");
    let accepted = first
        .put(
            &account,
            STORAGE,
            &json!({"location": "eastus", "sku": {"name": "Standard_LRS"}}),
        )
        .await;
    assert_eq!(accepted.status, 202);
    let op_id = accepted
        .header("location")
        .and_then(|l| l.split("/operations/").nth(1))
        .and_then(|l| l.split('?').next())
        .expect("op id")
        .to_owned();
    first.handle.shutdown().await;
    assert!(dir.path().join("state.json").exists());

    let second = env(config.clone()).await;
    assert_eq!(second.get(&rg_path("rg"), RESOURCES).await.status, 200);
    let monitor = format!(
        "/subscriptions/{SUB}/providers/Microsoft.Storage/operations/{op_id}?monitor=true&api-version={STORAGE}"
    );
    let done = second.poll_location(&monitor).await;
    assert_eq!(
        done.status, 200,
        "the operation started before the restart completes after it"
    );
    let keys = second.post(&format!("{account}/listKeys"), STORAGE).await;
    second.handle.shutdown().await;

    let third = env(config).await;
    let again = third.post(&format!("{account}/listKeys"), STORAGE).await;
    assert_eq!(keys.body, again.body, "keys are stable across restarts");
    assert_eq!(
        third.get(&account, STORAGE).await.body["name"],
        "persisted01"
    );
}

#[tokio::test]
async fn latency_scale_controls_operation_duration() {
    let slow = env(EmulatorConfig {
        latency_scale: 0.1,
        ..EmulatorConfig::default()
    })
    .await;
    slow.group("rg").await;
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/v");
    let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    let started = std::time::Instant::now();
    let created = slow.put(&vnet, NET, &body).await;
    // A VNet takes 5 s of ARM time, 0.5 s at 0.1: Retry-After counts the emulator's own
    // seconds (rounded up, at least 1), and retry-after-ms gives the exact wait.
    assert_eq!(created.header("retry-after"), Some("1"));
    let exact: u64 = created
        .header("retry-after-ms")
        .expect("the millisecond hint")
        .parse()
        .expect("whole milliseconds");
    assert!((400..=500).contains(&exact), "{exact} ms left of 500");
    let status_url = created.header("azure-asyncoperation").expect("async");
    let running = slow.send("GET", status_url, None, Some(&slow.token)).await;
    assert_eq!(running.body["status"], "InProgress");
    let left: u64 = running
        .header("retry-after")
        .expect("a running operation's status says when to look again")
        .parse()
        .expect("whole seconds");
    assert_eq!(left, 1, "under a second left still says 1, never 0");
    slow.poll_status(status_url).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(480) && took < Duration::from_secs(3),
        "VNet at 0.1 took {took:?}"
    );

    let instant = env(fast()).await;
    instant.group("rg").await;
    let created = instant.put(&vnet, NET, &body).await;
    assert_eq!(
        created.body["properties"]["provisioningState"], "Updating",
        "first answer is non-terminal"
    );
    assert_eq!(created.header("retry-after"), Some("1"));
    assert_eq!(created.header("retry-after-ms"), Some("0"));
    assert_eq!(
        instant.get(&vnet, NET).await.body["properties"]["provisioningState"],
        "Succeeded"
    );
}

#[tokio::test]
async fn ssh_endpoints_map_public_ips_to_local_ports() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let pip = env
        .get(&res("rg", "Microsoft.Network/publicIPAddresses/pip"), NET)
        .await;
    let address = pip.body["properties"]["ipAddress"]
        .as_str()
        .expect("address")
        .to_owned();
    let mapped = env
        .handle
        .map_ssh_endpoint(None, Some(&vm), "127.0.0.1:2222")
        .expect("mapped");
    assert_eq!(mapped.ip_address, address);
    let resp = env
        .http
        .post(format!("{}/_emulator/ssh-endpoints", env.handle.endpoint()))
        .json(&json!({"ipAddress": "20.0.0.9", "endpoint": "127.0.0.1:2223"}))
        .send()
        .await
        .expect("admin");
    assert_eq!(resp.status().as_u16(), 200);
    let listed: Value = env
        .http
        .get(format!("{}/_emulator/ssh-endpoints", env.handle.endpoint()))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let value = listed["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(value.len(), 2);
    assert_eq!(value[0]["ipAddress"], address);
    assert_eq!(value[0]["endpoint"], "127.0.0.1:2222");
    assert_eq!(
        value[0]["publicIpAddressId"],
        res("rg", "Microsoft.Network/publicIPAddresses/pip")
    );
    assert!(
        env.handle
            .map_ssh_endpoint(Some("1.2.3.4"), None, "not an address")
            .is_err()
    );
}

#[tokio::test]
async fn the_admin_api_lists_the_operations_it_ran() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let listed: Value = env
        .http
        .get(format!("{}/_emulator/operations", env.handle.endpoint()))
        .send()
        .await
        .expect("admin")
        .json()
        .await
        .expect("json");
    let operations = listed["operations"].as_object().expect("operations by id");
    let put = operations
        .values()
        .find(|op| {
            op["kind"] == "Put"
                && op["target"]
                    .as_str()
                    .is_some_and(|t| t.eq_ignore_ascii_case(&vm))
        })
        .expect("the VM's create is listed");
    assert!(
        put["started"].is_string() && put["due"].is_string(),
        "{put}"
    );
}

/// Restarts `vm` in `rg` and waits for the restart to finish; returns the first answer.
async fn restart(env: &Env, rg: &str, vm: &str) -> Resp {
    let path = res(
        rg,
        &format!("Microsoft.Compute/virtualMachines/{vm}/restart"),
    );
    let accepted = env.post(&path, COMPUTE).await;
    if let Some(location) = accepted.header("location") {
        env.poll_location(location).await;
    }
    accepted
}

#[tokio::test]
async fn computes_per_vm_update_limit_refuses_the_thirteenth_update_with_its_own_429() {
    // Compute lets 12 updates (actions, PATCH) through per VM, refilled 4 a minute; at latency
    // scale 0 the buckets run in real time, so nothing comes back during the burst.
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm1");
    let created = env
        .create(&vm, COMPUTE, &vm_body("rg", "Standard_D2s_v5"))
        .await;
    assert_eq!(
        created.header("x-ms-ratelimit-remaining-resource"),
        Some("Microsoft.Compute/PutVMResource;11,Microsoft.Compute/PutVMSubscription;1499")
    );
    for i in 0..12u32 {
        let accepted = restart(&env, "rg", "vm1").await;
        assert_eq!(accepted.status, 202, "update {i}: {:?}", accepted.body);
        assert_eq!(
            accepted.header("x-ms-ratelimit-remaining-resource"),
            Some(
                format!(
                    "Microsoft.Compute/UpdateVMResource;{},Microsoft.Compute/UpdateVMSubscription;{}",
                    11 - i,
                    1499 - i
                )
                .as_str()
            )
        );
    }
    let refused = restart(&env, "rg", "vm1").await;
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    assert_eq!(refused.code(), "OperationNotAllowed");
    assert_eq!(
        refused.message(),
        "The server rejected the request because too many requests have been received for this \
         subscription."
    );
    let detail = &refused.body["error"]["details"][0];
    assert_eq!(detail["code"], "TooManyRequests");
    assert_eq!(detail["target"], "UpdateVMResource");
    let violation: Value =
        serde_json::from_str(detail["message"].as_str().unwrap_or_default()).expect("JSON");
    assert_eq!(violation["operationGroup"], "UpdateVMResource");
    assert_eq!(violation["allowedRequestCount"], 12);
    assert_eq!(violation["measuredRequestCount"], 13);
    // One token comes back in 15 s.
    assert_eq!(refused.header("retry-after"), Some("15"));
    assert!(
        refused
            .header("retry-after-ms")
            .and_then(|ms| ms.parse::<u64>().ok())
            .is_some_and(|ms| (14_000..=15_000).contains(&ms)),
        "{:?}",
        refused.header("retry-after-ms")
    );
    assert_eq!(
        refused.header("x-ms-ratelimit-remaining-resource"),
        Some("Microsoft.Compute/UpdateVMResource;0,Microsoft.Compute/UpdateVMSubscription;1488")
    );
    // ARM let it through: its own bucket still had room, and says so.
    assert!(
        refused
            .header("x-ms-ratelimit-remaining-subscription-writes")
            .is_some()
    );
    // A PATCH of the VM is an update too and is refused the same way.
    let patch = env
        .call("PATCH", &vm, COMPUTE, Some(&json!({"tags": {"a": "b"}})))
        .await;
    assert_eq!((patch.status, patch.code()), (429, "OperationNotAllowed"));
    // Reads are not updates, and deleting is another policy.
    assert_eq!(env.get(&vm, COMPUTE).await.status, 200);
    let deleted = env.delete(&vm, COMPUTE).await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    assert_eq!(
        deleted.header("x-ms-ratelimit-remaining-resource"),
        Some("Microsoft.Compute/DeleteVMResource;11,Microsoft.Compute/DeleteVMSubscription;1499")
    );
}

#[tokio::test]
async fn computes_retry_after_counts_the_emulators_compressed_seconds() {
    let env = env(EmulatorConfig {
        latency_scale: 0.01,
        compute_limits: ComputeLimits {
            per_vm: BucketShape {
                capacity: 1,
                refill_per_minute: 1.0,
            },
            ..ComputeLimits::default()
        },
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    env.create(
        &res("rg", "Microsoft.Compute/virtualMachines/vm1"),
        COMPUTE,
        &vm_body("rg", "Standard_D2s_v5"),
    )
    .await;
    // Two restarts back to back: the second finds the VM's bucket empty.
    let action = res("rg", "Microsoft.Compute/virtualMachines/vm1/restart");
    let first = env.post(&action, COMPUTE).await;
    assert_eq!(first.status, 202, "{:?}", first.body);
    let refused = env.post(&action, COMPUTE).await;
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    // 60 s of Azure's time is 0.6 s here: Retry-After rounds up to 1, the exact wait is in ms.
    assert_eq!(refused.header("retry-after"), Some("1"));
    let wait = refused
        .header("retry-after-ms")
        .and_then(|ms| ms.parse::<u64>().ok())
        .expect("retry-after-ms");
    assert!((1..=600).contains(&wait), "{wait}");
    tokio::time::sleep(Duration::from_millis(wait)).await;
    env.poll_location(first.header("location").expect("Location"))
        .await;
    assert_eq!(restart(&env, "rg", "vm1").await.status, 202);
}

#[tokio::test]
async fn the_admin_api_counts_requests_and_switches_throttling_at_run_time() {
    let env = env(EmulatorConfig {
        throttle: false,
        ..fast()
    })
    .await;
    let base = env.handle.endpoint();
    let tally = || async {
        env.http
            .get(format!("{base}/_emulator/requests"))
            .send()
            .await
            .expect("admin reachable")
            .json::<Value>()
            .await
            .expect("JSON")
    };
    env.put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    env.get(&rg_path("rg"), RESOURCES).await;
    env.get(&rg_path("none"), RESOURCES).await;
    let counted = tally().await;
    assert_eq!(counted["total"], 3, "{counted}");
    assert_eq!(
        counted["byMethod"],
        json!({"GET": 2, "PUT": 1}),
        "{counted}"
    );
    assert_eq!(
        counted["byStatus"],
        json!({"200": 1, "201": 1, "404": 1}),
        "{counted}"
    );

    // Unthrottled, a burst past the write bucket is never refused (the headers still count).
    for _ in 0..210 {
        let resp = env
            .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await;
        assert_ne!(resp.status, 429);
    }
    let switched = env
        .http
        .put(format!("{base}/_emulator/throttle"))
        .json(&json!({"enabled": true}))
        .send()
        .await
        .expect("admin reachable");
    assert_eq!(switched.status().as_u16(), 200);
    // Switched on, the buckets start full again: the next write has 199 left, and a burst is
    // refused within the bucket (plus what refills in real time during it).
    let next = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!(
        next.header("x-ms-ratelimit-remaining-subscription-writes"),
        Some("199")
    );
    let mut refused = false;
    for _ in 0..400 {
        if env
            .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await
            .status
            == 429
        {
            refused = true;
            break;
        }
    }
    assert!(refused, "throttling is on again");
    let counted = tally().await;
    assert!(counted["byStatus"]["429"] == 1, "{counted}");
    let bad = env
        .http
        .put(format!("{base}/_emulator/throttle"))
        .json(&json!({"on": 1}))
        .send()
        .await
        .expect("admin reachable");
    assert_eq!(bad.status().as_u16(), 400);
    let reset = env
        .http
        .delete(format!("{base}/_emulator/requests"))
        .send()
        .await
        .expect("admin reachable");
    assert_eq!(reset.status().as_u16(), 204);
    assert_eq!(tally().await["total"], 0);
}
