//! Paging: every list answers at most `page_size` items and a `nextLink` on the request's own
//! origin while more remain; following the links yields the whole list exactly once.

use super::*;

fn paged(page_size: usize) -> EmulatorConfig {
    EmulatorConfig {
        page_size,
        ..fast()
    }
}

/// Follows `nextLink` from `path` to the last page: every item, and how many pages it took.
async fn follow(env: &Env, path: &str, version: &str) -> (Vec<Value>, usize) {
    let mut resp = env.get(path, version).await;
    let mut items = Vec::new();
    let mut pages = 0;
    loop {
        assert_eq!(resp.status, 200, "{path}: {:?}", resp.body);
        pages += 1;
        items.extend(resp.body["value"].as_array().cloned().unwrap_or_default());
        let Some(next) = resp.body["nextLink"].as_str().map(str::to_owned) else {
            return (items, pages);
        };
        assert!(
            next.starts_with(&format!("{}/", env.handle.endpoint())),
            "{next}"
        );
        assert!(next.contains(&format!("api-version={version}")), "{next}");
        resp = env.send("GET", &next, None, Some(&env.token)).await;
    }
}

fn names(items: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .filter_map(|i| i["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn lists_of_groups_and_resources_page_and_follow_to_the_whole_list() {
    let env = env(paged(1)).await;
    for rg in ["rg-a", "rg-b", "rg-c"] {
        env.group(rg).await;
    }
    let groups = format!("/subscriptions/{SUB}/resourcegroups");
    let first = env.get(&groups, RESOURCES).await;
    assert_eq!(first.body["value"].as_array().map(Vec::len), Some(1));
    let (items, pages) = follow(&env, &groups, RESOURCES).await;
    assert_eq!(names(&items), ["rg-a", "rg-b", "rg-c"]);
    assert_eq!(pages, 3, "one group per page, no empty page after the last");

    for name in ["pip1", "pip2"] {
        env.create(
            &res("rg-a", &format!("Microsoft.Network/publicIPAddresses/{name}")),
            NET,
            &json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await;
    }
    let (items, pages) = follow(
        &env,
        &res("rg-a", "Microsoft.Network/publicIPAddresses"),
        NET,
    )
    .await;
    assert_eq!(
        (names(&items), pages),
        (vec!["pip1".into(), "pip2".into()], 2)
    );
}

#[tokio::test]
async fn usages_and_filtered_skus_page_with_their_query_kept() {
    let whole = env(fast()).await;
    let small = env(paged(2)).await;
    let usages =
        format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages");
    let skus = format!(
        "/subscriptions/{SUB}/providers/Microsoft.Compute/skus?$filter=location eq 'westus2'"
    );
    for (path, version) in [(usages.as_str(), COMPUTE), (skus.as_str(), "2021-07-01")] {
        let (all, one_page) = follow(&whole, path, version).await;
        assert_eq!(one_page, 1, "the default page holds the whole list");
        let (in_pages, count) = follow(&small, path, version).await;
        assert_eq!(in_pages, all, "{path}: the same items in the same order");
        assert_eq!(count, all.len().div_ceil(2), "{path}");
    }
    let (westus2, _) = follow(&small, &skus, "2021-07-01").await;
    assert!(
        westus2.iter().all(|s| s["locations"] == json!(["westus2"])),
        "the $filter holds on every page"
    );
}

#[tokio::test]
async fn next_link_is_on_the_origin_the_request_was_sent_to() {
    let env = env(paged(1)).await;
    env.group("rg-a").await;
    env.group("rg-b").await;
    let port = env
        .handle
        .endpoint()
        .rsplit(':')
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let resp = env
        .http
        .get(env.url(&with_version(
            &format!("/subscriptions/{SUB}/resourcegroups"),
            RESOURCES,
        )))
        .header("host", format!("localhost:{port}"))
        .bearer_auth(&env.token)
        .send()
        .await
        .expect("reaches the emulator");
    let body: Value = resp.json().await.expect("JSON");
    assert_eq!(
        body["nextLink"],
        format!(
            "http://localhost:{port}/subscriptions/{SUB}/resourcegroups?api-version={RESOURCES}&$skiptoken=1"
        )
    );
}

#[tokio::test]
async fn a_skip_token_the_emulator_did_not_hand_out_is_refused() {
    let env = env(paged(1)).await;
    env.group("rg-a").await;
    let resp = env
        .get(
            &format!("/subscriptions/{SUB}/resourcegroups?$skiptoken=abc"),
            RESOURCES,
        )
        .await;
    assert_eq!((resp.status, resp.code()), (400, "InvalidSkipToken"));
    assert_eq!(
        resp.message(),
        "The skip token 'abc' is not valid. Use the nextLink of the previous page as it was returned."
    );
    let past_the_end = env
        .get(
            &format!("/subscriptions/{SUB}/resourcegroups?$skiptoken=5"),
            RESOURCES,
        )
        .await;
    assert_eq!(past_the_end.body, json!({"value": []}));
}

#[tokio::test]
async fn generic_resource_lists_filter_expand_and_page_by_top() {
    let env = env(paged(1)).await;
    env.network("rg-a").await;
    env.group("rg-b").await;
    env.create(
        &res("rg-b", "Microsoft.Network/publicIPAddresses/other"),
        NET,
        &json!({"location": "eastus", "tags": {"team": "ml"}, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
    )
    .await;
    let in_group = format!("{}/resources", rg_path("rg-a"));
    let (items, pages) = follow(&env, &in_group, RESOURCES).await;
    assert_eq!(
        names(&items),
        ["nic", "pip", "vnet"],
        "subnets are not listed"
    );
    assert_eq!(pages, 3);
    let pip = items.iter().find(|i| i["name"] == "pip").expect("listed");
    assert_eq!(
        pip,
        &json!({"id": res("rg-a", "Microsoft.Network/publicIPAddresses/pip"), "name": "pip",
                "type": "Microsoft.Network/publicIPAddresses", "location": "eastus",
                "sku": {"name": "Standard", "tier": "Regional"}}),
        "the envelope only, without $expand"
    );

    let (all, _) = follow(&env, &format!("/subscriptions/{SUB}/resources"), RESOURCES).await;
    assert_eq!(names(&all), ["nic", "other", "pip", "vnet"]);

    let filtered = format!(
        "/subscriptions/{SUB}/resources?$filter=resourceType eq 'microsoft.network/publicipaddresses' and tagName eq 'team' and tagValue eq 'ML'"
    );
    let (only, _) = follow(&env, &filtered, RESOURCES).await;
    assert_eq!(names(&only), ["other"]);

    let expanded = env
        .get(&format!("{in_group}?$expand=provisioningState"), RESOURCES)
        .await;
    assert_eq!(expanded.body["value"][0]["provisioningState"], "Succeeded");

    // $top is the page size: a larger emulator page still answers $top items per page.
    let big = super::env(fast()).await;
    big.network("rg-a").await;
    let first = big.get(&format!("{in_group}?$top=2"), RESOURCES).await;
    assert_eq!(first.body["value"].as_array().map(Vec::len), Some(2));
    let next = first.body["nextLink"].as_str().expect("a second page");
    assert!(
        next.contains("$top=2") && next.ends_with("$skiptoken=2"),
        "{next}"
    );
    let (all_of_a, pages) = follow(&big, &format!("{in_group}?$top=2"), RESOURCES).await;
    assert_eq!((all_of_a.len(), pages), (3, 2));
}

#[tokio::test]
async fn generic_resource_lists_answer_arm_errors() {
    let env = env(fast()).await;
    env.group("rg-a").await;
    let missing = env
        .get(&format!("{}/resources", rg_path("ghost")), RESOURCES)
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (404, "ResourceGroupNotFound")
    );
    let bad = env
        .get(
            &format!("/subscriptions/{SUB}/resources?$filter=substringof('a', name)"),
            RESOURCES,
        )
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (400, "InvalidFilterInQueryString")
    );
    assert_eq!(
        bad.message(),
        "Invalid $filter 'substringof('a', name)' specified in the query string."
    );
    let empty = env
        .get(&format!("{}/resources", rg_path("rg-a")), RESOURCES)
        .await;
    assert_eq!(empty.body, json!({"value": []}));
}

#[tokio::test]
async fn subscription_wide_lists_span_every_group_and_page() {
    let env = env(paged(1)).await;
    env.network("rg-a").await;
    env.network("rg-b").await;
    let nics = format!("/subscriptions/{SUB}/providers/Microsoft.Network/networkInterfaces");
    let (items, pages) = follow(&env, &nics, NET).await;
    let ids: Vec<&str> = items.iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(
        ids,
        [
            res("rg-a", "Microsoft.Network/networkInterfaces/nic"),
            res("rg-b", "Microsoft.Network/networkInterfaces/nic")
        ]
    );
    assert_eq!(pages, 2);
    assert!(
        items[0]["properties"]["ipConfigurations"].is_array(),
        "the full representation, as a GET shows it"
    );
    let (vnets, _) = follow(
        &env,
        &format!("/subscriptions/{SUB}/providers/Microsoft.Network/virtualNetworks"),
        NET,
    )
    .await;
    assert_eq!(vnets.len(), 2);
    let subnets = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Network/subnets"),
            NET,
        )
        .await;
    assert_eq!(
        (subnets.status, subnets.code()),
        (404, "InvalidResourceType")
    );
}
