//! The built-in emulator (`--emulator`), whose sizes come from dsinfra's catalog: its Resource
//! SKUs and usages answers, as the preflight reads them (one location at a time, `$filter`ed),
//! say what the catalog says, conform to the spec, and stay quick at the catalog's size.

use std::collections::BTreeSet;
use std::time::Instant;

use dsinfra::azure::types::quota::SkuAvailability;
use dsinfra::catalog;
use dsinfra::connect::builtin_emulator_config;

use crate::harness::{SUB, env};

#[tokio::test]
async fn the_catalog_backed_skus_and_usages_say_what_the_catalog_says_and_conform() {
    let Some(env) = env(builtin_emulator_config(None, 0.0)).await else {
        return;
    };
    let today = catalog::today();
    for location in ["eastus", "westeurope"] {
        let started = Instant::now();
        let skus = env.client.compute_skus(SUB, location).await.expect("skus");
        let took = started.elapsed();
        eprintln!("{} SKUs in {location} in {took:?}", skus.len());
        let listed: BTreeSet<&str> = skus.iter().filter_map(|s| s.name.as_deref()).collect();
        let offered: BTreeSet<&str> = catalog::vm_sizes()
            .iter()
            .filter(|s| catalog::regions_offering(&s.name).contains(&location))
            .map(|s| &*s.name)
            .collect();
        assert_eq!(listed, offered, "{location}: the catalog's sizes, no more");
        for sku in &skus {
            let name = sku.name.as_deref().unwrap_or_default();
            let facts = catalog::shipped_size(name).expect("a catalog size");
            assert_eq!(
                sku.capability("vCPUs"),
                Some(facts.vcpus.to_string().as_str())
            );
            assert_eq!(sku.family.as_deref(), Some(&*facts.quota_family));
            let retired = facts.retirement_date.is_some_and(|d| d <= today);
            assert_eq!(
                matches!(
                    sku.availability(location),
                    SkuAvailability::Restricted { .. }
                ),
                retired,
                "{name} in {location}"
            );
        }
        let usages = env
            .client
            .compute_usages(SUB, location)
            .await
            .expect("usages");
        let families: BTreeSet<&str> = usages.iter().map(|u| u.name.value.as_str()).collect();
        for size in &offered {
            let family = catalog::shipped_size(size).map(|s| &*s.quota_family);
            assert!(
                family.is_some_and(|f| families.contains(f)),
                "{size}'s family {family:?} is counted in {location}"
            );
        }
    }
    let nc = env
        .client
        .compute_skus(SUB, "eastus")
        .await
        .expect("skus")
        .into_iter()
        .find(|s| s.name.as_deref() == Some("Standard_NC6s_v3"))
        .expect("the retired NC6s_v3 is still listed");
    assert_eq!(nc.capability("RetirementDateUtc"), Some("09/30/2025"));
    env.assert_conformant();
}
