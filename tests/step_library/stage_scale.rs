//! `stage` at CosmoFlow's scale: 300,000 blobs over 64 nodes. Each node's script must stay small
//! (the same text everywhere, under 64 KiB) and each node must receive exactly its own shard, as
//! the step file the runner delivers next to the script. Before, every script embedded every
//! rank's list: tens of MB per node.

use std::collections::BTreeSet;

use super::*;

const BLOBS: usize = 300_000;
const NODES: usize = 64;

#[test]
fn stage_sends_each_node_only_its_own_list_and_every_script_stays_under_64_kib() {
    let listing = dataset::cosmoflow_listing(BLOBS);
    let mut ctx = NodeContext::new(
        "scale",
        "cluster.train",
        (0..NODES)
            .map(|i| ClusterNode {
                name: format!("train-{i}"),
                private_ip: format!("10.0.0.{}", 4 + i),
                ssh_port: 22,
            })
            .collect(),
    );
    ctx.storage.insert(
        "storage_account.data.container.cosmoflow".into(),
        StorageTarget::azure("dsinfrascale", "cosmoflow"),
    );
    ctx.credentials.insert(
        "sas.read".into(),
        Credential {
            kind: CredentialKind::Sas,
            identity: "sas.read".into(),
            value: Secret::new(FAKE_SAS),
        },
    );
    ctx.listings.insert("stage".into(), listing.clone());
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "from": "storage_account.data.container.cosmoflow", "sas": "sas.read",
        "prefix": "cosmoUniverse/", "decompress": true, "timeout": "2h"
    }))
    .expect("a map");
    let request = StepRequest {
        name: "stage",
        kind: "stage",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    let expansion = library::render(&request, &ctx).expect("stage renders");
    let [step] = expansion.steps.as_slice() else {
        panic!("one runner step");
    };
    assert!(
        step.script.len() < 64 * 1024,
        "the script is {} bytes",
        step.script.len()
    );
    assert!(
        !step.script.contains("univ_ics"),
        "no blob name in the script"
    );

    // One file, one list per rank: exactly the rank's shard, each blob in exactly one list.
    let [file] = step.files.as_slice() else {
        panic!("one delivered file");
    };
    assert_eq!(file.name, library::SHARD_FILE);
    let FileContent::ByRank(lists) = &file.content else {
        panic!("a sharded stage gives each rank its own list");
    };
    assert_eq!(lists.len(), NODES);
    let plan = library::stage_shards(&listing, "cosmoUniverse/", None, NODES, true).expect("valid");
    let mut seen = BTreeSet::new();
    for (rank, list) in lists.iter().enumerate() {
        let mut expected = String::new();
        for (blob, local, size) in &plan.shards[rank].entries {
            let _ = writeln!(expected, "{size}\t{blob}\t{local}");
        }
        assert!(*list == expected, "rank {rank} gets exactly its shard");
        assert_eq!(file.for_rank(rank), list.as_str());
        for line in list.lines() {
            let blob = line.split('\t').nth(1).expect("three fields");
            assert!(seen.insert(blob.to_owned()), "{blob} is in two lists");
        }
        // About 1/64 of the whole: what one node receives, not the dataset's list.
        assert!(
            list.lines().count() < BLOBS / NODES * 11 / 10,
            "rank {rank} holds {} lines",
            list.lines().count()
        );
    }
    assert_eq!(seen.len(), BLOBS);
    assert_eq!(
        file.for_rank(NODES),
        "",
        "a node past the shards gets an empty list"
    );
}

#[test]
fn an_unsharded_stage_gives_every_node_the_whole_list() {
    let steps = extras();
    let step = steps
        .iter()
        .find(|s| s.name == "local-copy")
        .expect("the unsharded extra");
    let [file] = step.files.as_slice() else {
        panic!("one delivered file");
    };
    let FileContent::Same(list) = &file.content else {
        panic!("every node copies the same list");
    };
    assert_eq!(list.lines().count(), dataset::FILES);
    assert_eq!(file.for_rank(0), file.for_rank(2));
}
