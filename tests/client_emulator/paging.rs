//! Lists of one item per page: the client follows every `nextLink` the emulator hands out and
//! ends with the same list as from one page, and every paged answer conforms to the spec.

use dsinfra::azure::ResourceId;
use dsinfra::emulator::EmulatorConfig;

use crate::harness::{LOCATION, SUB, env, network};

#[tokio::test]
async fn usages_and_skus_in_pages_of_one_equal_the_single_page() {
    let (Some(whole), Some(paged)) = (
        env(EmulatorConfig::default()).await,
        env(EmulatorConfig {
            page_size: 1,
            ..EmulatorConfig::default()
        })
        .await,
    ) else {
        return;
    };
    let usages = whole
        .client
        .compute_usages(SUB, LOCATION)
        .await
        .expect("usages");
    let skus = whole
        .client
        .compute_skus(SUB, LOCATION)
        .await
        .expect("skus");
    assert!(
        usages.len() > 1 && skus.len() > 1,
        "lists long enough to page"
    );
    assert_eq!(
        paged
            .client
            .compute_usages(SUB, LOCATION)
            .await
            .expect("usages"),
        usages
    );
    assert_eq!(
        paged
            .client
            .compute_skus(SUB, LOCATION)
            .await
            .expect("skus"),
        skus
    );

    // One GET per item: the first page and a follow-up for each further one.
    let gets = |env: &crate::harness::Env, path: &ResourceId| {
        env.exchanges()
            .iter()
            .filter(|e| e.method == "GET" && e.path == path.as_str() && e.status == 200)
            .count()
    };
    let usages_path = ResourceId::compute_usages(SUB, LOCATION);
    let skus_path = ResourceId::compute_skus(SUB);
    assert_eq!(gets(&whole, &usages_path), 1);
    assert_eq!(gets(&whole, &skus_path), 1);
    assert_eq!(gets(&paged, &usages_path), usages.len());
    assert_eq!(gets(&paged, &skus_path), skus.len());
    whole.assert_conformant();
    paged.assert_conformant();
}

/// The generic and subscription-wide lists, which dsinfra's client does not send yet, held to
/// the spec the same way through plain HTTP: every page of a group's and a subscription's
/// resources (with a filter, an expansion and `$top`) and of each type's subscription-wide list
/// validates against its list schema.
#[tokio::test]
async fn generic_resource_pages_conform_to_the_spec() {
    let Some(env) = env(EmulatorConfig {
        page_size: 1,
        ..EmulatorConfig::default()
    })
    .await
    else {
        return;
    };
    network(&env.client, "rg-generic").await;
    let http = reqwest::Client::new();
    let base = env.handle.endpoint();
    network(&env.client, "rg-other").await;
    let mut seen = 0;
    let mut firsts = vec![
        format!(
            "{base}/subscriptions/{SUB}/resourceGroups/rg-generic/resources?api-version=2025-04-01&$expand=provisioningState,createdTime"
        ),
        format!(
            "{base}/subscriptions/{SUB}/resources?api-version=2025-04-01&$top=2&$filter=resourceType eq 'Microsoft.Network/networkInterfaces'"
        ),
    ];
    // The subscription-wide list of each type, at the api-version dsinfra uses for it.
    for (rtype, version) in [
        ("Microsoft.Network/virtualNetworks", "2024-07-01"),
        ("Microsoft.Network/networkSecurityGroups", "2024-07-01"),
        ("Microsoft.Network/networkInterfaces", "2024-07-01"),
        ("Microsoft.Network/publicIPAddresses", "2024-07-01"),
        ("Microsoft.Compute/virtualMachines", "2024-11-01"),
        ("Microsoft.Compute/disks", "2025-01-02"),
        ("Microsoft.Storage/storageAccounts", "2025-01-01"),
    ] {
        firsts.push(format!(
            "{base}/subscriptions/{SUB}/providers/{rtype}?api-version={version}"
        ));
    }
    for first in firsts {
        let mut url = Some(first);
        while let Some(next) = url.take() {
            let body: serde_json::Value = http
                .get(&next)
                .bearer_auth("emulator-token")
                .send()
                .await
                .expect("reaches the emulator")
                .json()
                .await
                .expect("JSON");
            seen += body["value"].as_array().map_or(0, Vec::len);
            url = body["nextLink"].as_str().map(str::to_owned);
        }
    }
    assert!(seen >= 6, "two groups' networks were listed: {seen}");
    env.assert_conformant();
}
