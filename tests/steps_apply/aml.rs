//! Steps on the nodes of an Azure Machine Learning cluster, end to end: the emulator's AML node
//! hook maps each of the four nodes of an `aml_cluster` (at the cluster's public IP and the
//! node's own port, as `listNodes` gives them) to a local sshd that made its own host key
//! (tests/common/aml_nodes.rs), and the real binary applies the manifest: it makes a new
//! workspace with its dependencies, the compute, and runs the steps.
//!
//! Held: the workspace and what it needs are made from the manifest; the steps run on all four nodes, head-only ones on node 0 after the others; every
//! node's key is trusted on first use and pinned in the state on the compute, under its node
//! id, with the step records; apply lists the nodes; a second apply runs nothing and changes no
//! record; a node presenting a key other than its pinned one is refused, with what to do.

use std::collections::BTreeMap;

use dsinfra::ssh::HostKeyPair;

use super::*;

/// A new workspace (dsinfra makes what it needs) and a fixed-size cluster of four nodes whose
/// steps write where they ran.
fn write_aml_manifest(w: &World, farm: &AmlNodeFarm) {
    let out = w.out().display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"aml_workspace "ws" {{}}
aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 4
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "script" {{
    name   = "prep"
    script = <<EOT
if [ "$DSINFRA_RANK" != 0 ]; then sleep 1; fi
echo "$DSINFRA_NODE of $DSINFRA_NODES" >> {out}/prep-$DSINFRA_RANK
EOT
  }}
  step "script" {{
    name   = "gather"
    scope  = "head"
    script = "ls {out} | grep -c '^prep-' > {out}/gather"
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
        ),
    );
}

/// The compute's node records in the state: node id -> (pinned key, recorded step names).
fn node_records(w: &World) -> BTreeMap<String, (String, Vec<String>)> {
    let compute = w.resource("aml_cluster.scratch.compute");
    compute["nodes"]
        .as_object()
        .map(|nodes| {
            nodes
                .iter()
                .map(|(id, record)| {
                    let key = record["host_key"].as_str().unwrap_or_default().to_owned();
                    let steps = record["steps"]
                        .as_object()
                        .map(|s| s.keys().cloned().collect())
                        .unwrap_or_default();
                    (id.clone(), (key, steps))
                })
                .collect()
        })
        .unwrap_or_default()
}

// One cluster's story, first apply to a refused key, told in order.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_run_on_four_aml_nodes_at_their_ports_with_keys_pinned_on_first_use() {
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm(Arc::clone(&farm)).await;
    write_aml_manifest(&w, &farm);

    // From the manifest: the workspace's dependencies, the workspace, the compute, the steps.
    let started_at = std::time::Instant::now();
    let first = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    eprintln!("first apply took {:?}", started_at.elapsed());
    // dsinfra made the workspace and everything Azure requires of one.
    let addresses: Vec<String> = w.state()["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["address"].as_str().map(str::to_owned))
        .collect();
    for made in [
        "aml_workspace.ws.storage",
        "aml_workspace.ws.key_vault",
        "aml_workspace.ws.logs",
        "aml_workspace.ws.insights",
        "aml_workspace.ws.workspace",
        "aml_cluster.scratch.compute",
    ] {
        assert!(
            addresses.iter().any(|a| a == made),
            "{made}: {addresses:?}\n{first}"
        );
    }
    let booted = farm.booted();
    assert_eq!(booted.len(), 4, "{first}");
    let mut ids: Vec<String> = booted.iter().map(|b| b.node_id.clone()).collect();
    ids.sort();
    // Every node ran `prep` once, as node i of 4, and the head counted them after.
    for rank in 0..4 {
        assert_eq!(
            w.read(&format!("prep-{rank}")),
            format!("aml_cluster.scratch[{rank}] of 4\n"),
            "{first}"
        );
    }
    assert_eq!(w.read("gather").trim(), "4", "{first}");
    // Apply lists the nodes as listNodes gave them, in node-id order, at their own ports.
    assert!(
        first.contains("nodes of aml_cluster.scratch (listNodes):"),
        "{first}"
    );
    for (i, id) in ids.iter().enumerate() {
        let boot = booted.iter().find(|b| &b.node_id == id).expect("booted");
        let line = format!(
            "aml_cluster.scratch[{i}]  {id}  {}:{}  private {}  ",
            boot.public_ip, boot.port, boot.private_ip
        );
        assert!(first.contains(&line), "{line}\n{first}");
    }
    // Each node's own key was trusted on first use and pinned under its node id, with what
    // succeeded there (`gather` on the head only).
    let records = node_records(&w);
    assert_eq!(records.keys().cloned().collect::<Vec<_>>(), ids);
    for (i, id) in ids.iter().enumerate() {
        let (key, steps) = &records[id];
        let farm_key = farm.host_key(id).expect("a host per node").to_openssh();
        assert_eq!(
            key.split_whitespace().take(2).collect::<Vec<_>>(),
            farm_key.split_whitespace().take(2).collect::<Vec<_>>(),
            "node {id}"
        );
        let expected: &[&str] = if i == 0 {
            &["gather", "prep"]
        } else {
            &["prep"]
        };
        assert_eq!(steps, expected, "node {id}");
    }

    // Nothing to do: no step starts, every node is checked against its pinned key, and the
    // records stay as they were.
    let before = w.state_text();
    let second = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
    assert_eq!(w.read("gather").trim(), "4");
    assert_eq!(node_records(&w), records);
    assert_eq!(
        serde_json::from_str::<Value>(&before).expect("json")["resources"],
        w.state()["resources"],
        "{second}"
    );

    // Node 2 now presents another key than the one pinned for its id (here: the pin changed,
    // which is the same mismatch seen from dsinfra): refused, nothing runs there, and the
    // message says what it means for an AML node and what to do.
    let other = HostKeyPair::generate()
        .expect("a key")
        .public()
        .to_openssh();
    let path = farm_apply::state_path(w.dir.path(), "stepsdemo");
    let mut state = w.state();
    for r in state["resources"].as_array_mut().expect("resources") {
        if r["address"] == "aml_cluster.scratch.compute" {
            r["nodes"][&ids[2]]["host_key"] = Value::from(other.clone());
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&state).expect("json"))
        .expect("state written");
    let (out, text) = w.run(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("node aml_cluster.scratch[2]: host key mismatch"),
        "{text}"
    );
    assert!(
        text.contains("an AML node of aml_cluster.scratch presented a host key other than the one dsinfra pinned for its node id"),
        "{text}"
    );
    assert!(
        text.contains("`dsinfra park` then `dsinfra unpark`"),
        "{text}"
    );
    assert_eq!(
        node_records(&w)[&ids[2]].0,
        other,
        "a refused key is not pinned"
    );
}

/// A new workspace and four nodes meshed for BeeOND-style tools: `ssh_mesh` writes the nodefile
/// on the head, and a head-only script then dials every address in it by address alone (the
/// port comes from the mesh's SSH config, as pdsh under `beeond -P` dials), recording which
/// server answered.
fn write_mesh_manifest(w: &World, farm: &AmlNodeFarm) {
    let out = w.out().display().to_string();
    let mesh = farm.mesh_dir().display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"aml_workspace "ws" {{}}
aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 4
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "ssh_mesh" {{
    nodefile = "{out}/nodefile"
  }}
  step "script" {{
    name   = "reach"
    scope  = "head"
    script = <<EOT
while read -r address; do
  ssh -n -F {mesh}/config {user}@"$address" 'echo "$SSH_CONNECTION"'
done < {out}/nodefile > {out}/reached
EOT
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
        ),
    );
}

// Issue 17, Done-when 2 (the mesh half): the nodes' mesh and nodefile through the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesh_and_nodefile_on_four_aml_nodes_name_every_node_by_its_own_address() {
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm(Arc::clone(&farm)).await;
    write_mesh_manifest(&w, &farm);
    let mesh = farm.mesh_dir();
    let admin_mesh = farm.admin_mesh_dir();
    let user = std::path::PathBuf::from(farm.user());
    let env = [
        ("DSINFRA_MESH_DIR", mesh.as_path()),
        ("DSINFRA_MESH_USER", user.as_path()),
        ("DSINFRA_MESH_ADMIN_DIR", admin_mesh.as_path()),
    ];

    let started_at = std::time::Instant::now();
    let (out, first) = w
        .run_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(out.status.success(), "{first}");
    eprintln!("first apply took {:?}", started_at.elapsed());
    let mut booted = farm.booted();
    booted.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    assert_eq!(booted.len(), 4, "{first}");

    // The nodefile lists the nodes head first, in listNodes' order, each by the address its
    // private IP maps to here: four distinct addresses, one per node.
    let expected: Vec<String> = booted
        .iter()
        .map(|b| common::aml_nodes::loopback_for(&b.private_ip).to_string())
        .collect();
    let nodefile = w.read("nodefile");
    assert_eq!(nodefile.lines().collect::<Vec<_>>(), expected, "{first}");

    // The head reached every node through the mesh by address alone, and the server that
    // answered is that node's own sshd (its address and port).
    let reached: Vec<(String, u16)> = w
        .read("reached")
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 4, "SSH_CONNECTION: {line}");
            (fields[2].to_owned(), fields[3].parse().expect("a port"))
        })
        .collect();
    let served: Vec<(String, u16)> = booted
        .iter()
        .zip(&expected)
        .map(|(b, address)| {
            let port = farm
                .with_host(&b.node_id, |h| h.port)
                .expect("a host per node");
            (address.clone(), port)
        })
        .collect();
    assert_eq!(reached, served, "{first}");

    // The head's mesh key went to the nodes' authorized_keys once, next to the keys they had.
    let head_key = std::fs::read_to_string(mesh.join("id_ed25519.pub")).expect("the head's key");
    let authorized =
        std::fs::read_to_string(mesh.join("authorized_keys")).expect("authorized_keys");
    assert_eq!(
        authorized.lines().filter(|l| *l == head_key.trim()).count(),
        1,
        "{authorized}"
    );
    assert!(
        authorized.starts_with(&farm.client_public_key()),
        "{authorized}"
    );

    // Nothing to do the second time: no step starts, not even the head-key read (the key is
    // recorded with the head's node record), and no record changes.
    let before = w.state()["resources"].clone();
    let second = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
    let compute = w.resource("aml_cluster.scratch.compute");
    assert_eq!(
        compute["nodes"][&booted[0].node_id]["mesh_key"]["key"].as_str(),
        Some(head_key.trim()),
        "the head's key is recorded with the head's node record"
    );
    assert_eq!(
        std::fs::read_to_string(mesh.join("id_ed25519.pub")).expect("the head's key"),
        head_key,
        "the head keeps its key"
    );
    assert_eq!(w.state()["resources"], before, "{second}");
}

/// How many requests the emulator received with `method` on the workspace `amlws` itself (not
/// its computes).
fn workspace_requests(w: &World, method: &str) -> usize {
    w.requests
        .lock()
        .expect("not poisoned")
        .iter()
        .filter(|(_, m, path)| {
            m == method
                && path.to_ascii_lowercase().contains("/workspaces/amlws")
                && !path.to_ascii_lowercase().contains("/computes")
        })
        .count()
}

// Issue 17: `existing = true` end to end: the workspace another experiment made is read, never
// written, and the cluster made in it runs its steps on its nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_in_an_existing_workspace_runs_its_steps_and_leaves_the_workspace_alone() {
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm(Arc::clone(&farm)).await;
    // Another experiment's workspace, in its own group.
    std::fs::write(
        w.path("base.hcl"),
        "experiment = \"base\"\nazure { location = \"eastus\" }\naml_workspace \"ws\" { name = \"amlws\" }\n",
    )
    .expect("manifest written");
    w.ok(&["apply", "base.hcl", "--auto-approve"]).await;
    let (puts, deletes) = (
        workspace_requests(&w, "PUT"),
        workspace_requests(&w, "DELETE"),
    );
    assert_eq!(puts, 1, "the base experiment made the workspace");

    let out = w.out().display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"aml_workspace "ws" {{
  existing       = true
  name           = "amlws"
  resource_group = "dsinfra-base"
}}
aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 2
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "script" {{
    name   = "hello"
    script = "echo \"$DSINFRA_NODE\" > {out}/hello-$DSINFRA_RANK"
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
        ),
    );
    let first = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    for rank in 0..2 {
        assert_eq!(
            w.read(&format!("hello-{rank}")),
            format!("aml_cluster.scratch[{rank}]\n"),
            "{first}"
        );
    }
    // Only the compute is dsinfra's here: the workspace is no resource of this experiment and
    // was neither written nor deleted.
    let addresses: Vec<String> = w.state()["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["address"].as_str().map(str::to_owned))
        .filter(|a| a.starts_with("aml_"))
        .collect();
    assert_eq!(addresses, ["aml_cluster.scratch.compute"], "{first}");
    assert_eq!(workspace_requests(&w, "PUT"), puts, "{first}");
    assert_eq!(workspace_requests(&w, "DELETE"), deletes, "{first}");
    assert_eq!(farm.booted().len(), 2, "{first}");

    let second = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
}
