//! Lists of one item per page: the client follows every `nextLink` the emulator hands out and
//! ends with the same list as from one page, and every paged answer conforms to the spec.

use dsinfra::azure::ResourceId;
use dsinfra::emulator::EmulatorConfig;

use crate::harness::{LOCATION, SUB, env};

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
    let skus = whole.client.compute_skus(SUB, LOCATION).await.expect("skus");
    assert!(usages.len() > 1 && skus.len() > 1, "lists long enough to page");
    assert_eq!(
        paged.client.compute_usages(SUB, LOCATION).await.expect("usages"),
        usages
    );
    assert_eq!(
        paged.client.compute_skus(SUB, LOCATION).await.expect("skus"),
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
