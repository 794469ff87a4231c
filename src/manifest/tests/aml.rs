//! Issue 17: `aml_workspace` and `aml_cluster` blocks, from text to the resources and steps the
//! engine reads (the shapes in docs/decisions.md, decision 42).

use super::*;

fn aml(extra: &str) -> String {
    format!("experiment = \"aml\"\nazure {{ location = \"southcentralus\" }}\n{extra}\n")
}

fn cluster(attrs: &str) -> String {
    format!(
        "aml_cluster \"c\" {{\n  size    = \"Standard_ND40rs_v2\"\n  count   = 4\n  ssh_key = \"{KEY}\"\n{attrs}\n}}\n"
    )
}

fn load_aml(text: &str) -> Loaded {
    load_ok(Path::new("aml.hcl"), text, &LoadOptions::default())
}

/// The summaries of the errors (and warnings) a manifest that fails to load gives.
fn problems(text: &str) -> Vec<String> {
    match load_str(Path::new("aml.hcl"), text, &LoadOptions::default()) {
        Ok(loaded) => panic!(
            "loaded: {:?}",
            loaded
                .warnings
                .iter()
                .map(|w| &w.summary)
                .collect::<Vec<_>>()
        ),
        Err(failed) => failed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.summary.clone())
            .collect(),
    }
}

#[test]
fn a_new_workspace_brings_what_azure_requires() {
    let loaded = load_aml(&aml(&format!(
        "aml_workspace \"ws\" {{}}\n{}",
        cluster("  step \"beeond\" {}")
    )));
    assert_eq!(
        addresses(&loaded),
        [
            "aml_cluster.c.compute",
            "aml_workspace.ws.insights",
            "aml_workspace.ws.key_vault",
            "aml_workspace.ws.logs",
            "aml_workspace.ws.storage",
            "aml_workspace.ws.workspace",
            "azure.resource_group",
        ]
    );
    let ws = resource(&loaded, "aml_workspace.ws.workspace");
    assert_eq!(ws.kind, ResourceKind::MlWorkspace);
    assert_eq!(ws.name, "aml-ws");
    assert_eq!(ws.attrs["storage_account"], "aml_workspace.ws.storage");
    assert_eq!(ws.attrs["key_vault"], "aml_workspace.ws.key_vault");
    assert_eq!(
        ws.attrs["application_insights"],
        "aml_workspace.ws.insights"
    );
    assert_eq!(ws.attrs["sku"], "Basic");
    assert_eq!(ws.attrs["friendly_name"], "ws");
    assert!(!ws.attrs.contains_key("container_registry"));
    let deps: Vec<String> = ws.depends_on.iter().map(ToString::to_string).collect();
    assert_eq!(
        deps,
        [
            "aml_workspace.ws.insights",
            "aml_workspace.ws.key_vault",
            "aml_workspace.ws.storage",
            "azure.resource_group",
        ]
    );
    let storage = resource(&loaded, "aml_workspace.ws.storage");
    assert_eq!(storage.kind, ResourceKind::StorageAccount);
    assert_eq!(
        (
            &storage.attrs["kind"],
            &storage.attrs["sku"],
            &storage.attrs["hns"]
        ),
        (&json!("StorageV2"), &json!("Standard_LRS"), &json!(false))
    );
    let vault = resource(&loaded, "aml_workspace.ws.key_vault");
    assert_eq!(vault.attrs["sku"], "standard");
    assert!(names::check(ResourceKind::KeyVault, &vault.name).is_ok());
    let logs = resource(&loaded, "aml_workspace.ws.logs");
    assert_eq!(
        (&logs.attrs["sku"], &logs.attrs["retention_days"]),
        (&json!("PerGB2018"), &json!(30))
    );
    let insights = resource(&loaded, "aml_workspace.ws.insights");
    assert_eq!(insights.attrs["application_type"], "web");
    assert_eq!(insights.attrs["logs"], "aml_workspace.ws.logs");
    assert!(
        insights
            .depends_on
            .contains(&"aml_workspace.ws.logs".parse().expect("address"))
    );
    for r in &loaded.desired.resources {
        assert_eq!(r.attrs["location"], "southcentralus", "{}", r.address);
        assert_eq!(r.resource_group, "dsinfra-aml", "{}", r.address);
    }
}

#[test]
fn a_cluster_is_one_fixed_size_compute_in_its_workspace() {
    let loaded = load_aml(&aml(&format!(
        "aml_workspace \"ws\" {{ container_registry = true }}\n{}",
        cluster(
            "  priority = \"low_priority\"\n  idle_seconds_before_scaledown = 300\n  admin_username = \"hpc\"\n  step \"beeond\" {}\n  step \"elbencho\" {}"
        )
    )));
    let compute = resource(&loaded, "aml_cluster.c.compute");
    assert_eq!(compute.kind, ResourceKind::MlCompute);
    assert_eq!(compute.parent.as_deref(), Some("aml-ws"));
    assert_eq!(compute.name, names::aml_compute_name("aml", "c"));
    assert!(compute.name.starts_with("c-") && compute.name.len() == 6);
    let attrs = &compute.attrs;
    assert_eq!(attrs["size"], "Standard_ND40rs_v2");
    assert_eq!(attrs["count"], 4);
    assert_eq!(attrs["priority"], "LowPriority");
    assert_eq!(attrs["idle_seconds_before_scaledown"], 300);
    assert_eq!(attrs["admin_username"], "hpc");
    assert_eq!(attrs["ssh_public_key"], KEY);
    assert_eq!(attrs["workspace_name"], "aml-ws");
    assert_eq!(attrs["workspace_resource_group"], "dsinfra-aml");
    assert_eq!(attrs["existing_workspace"], false);
    assert_eq!(attrs["workspace"], "aml_workspace.ws.workspace");
    assert!(!attrs.contains_key("subnet") && !attrs.contains_key("subnet_name"));
    assert_eq!(attrs["tags"]["dsinfra-address"], "aml_cluster.c.compute");
    assert!(
        compute
            .depends_on
            .contains(&"aml_workspace.ws.workspace".parse().expect("address"))
    );
    let ws = resource(&loaded, "aml_workspace.ws.workspace");
    assert_eq!(ws.attrs["container_registry"], "aml_workspace.ws.registry");
    let registry = resource(&loaded, "aml_workspace.ws.registry");
    assert_eq!(registry.kind, ResourceKind::ContainerRegistry);
    assert_eq!(registry.attrs["sku"], "Basic");
    // Steps belong to the block, as a `cluster`'s do; cluster-only kinds are allowed, and
    // BeeOND picks InfiniBand on an InfiniBand size.
    let steps: Vec<(String, &str)> = loaded
        .desired
        .steps
        .iter()
        .map(|s| (s.block.to_string(), s.kind.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("aml_cluster.c".to_owned(), "beeond"),
            ("aml_cluster.c".to_owned(), "elbencho")
        ]
    );
    assert_eq!(loaded.desired.steps[0].params["interface"], "ib0");
    assert_eq!(loaded.desired.steps[0].params["data_dir"], "{temp}/beeond");
    let notes: Vec<String> = loaded
        .desired
        .notes
        .iter()
        .map(|(block, _)| block.to_string())
        .collect();
    assert_eq!(notes, ["aml_cluster.c", "aml_cluster.c"]);
}

#[test]
fn an_existing_workspace_is_read_never_created() {
    let loaded = load_aml(&aml(&format!(
        "aml_workspace \"shared\" {{\n  existing = true\n  name = \"cosmoflow-ws\"\n  resource_group = \"ml-rg\"\n  location = \"East US\"\n}}\n{}\noutput \"g\" {{ value = aml_workspace.shared.resource_group }}\noutput \"n\" {{ value = aml_cluster.c.name }}\n",
        cluster("  workspace = aml_workspace.shared")
    )));
    assert_eq!(
        addresses(&loaded),
        ["aml_cluster.c.compute", "azure.resource_group"]
    );
    let compute = resource(&loaded, "aml_cluster.c.compute");
    assert_eq!(compute.parent.as_deref(), Some("cosmoflow-ws"));
    assert_eq!(compute.resource_group, "ml-rg");
    assert_eq!(compute.attrs["location"], "eastus");
    assert_eq!(compute.attrs["existing_workspace"], true);
    assert_eq!(compute.attrs["workspace_resource_group"], "ml-rg");
    assert!(!compute.attrs.contains_key("workspace"));
    let outputs: Vec<&Json> = loaded.desired.outputs.iter().map(|o| &o.value).collect();
    assert_eq!(outputs, [&json!("ml-rg"), &json!(compute.name)]);
}

#[test]
fn a_cluster_on_a_network_names_its_vnet_and_subnet() {
    let loaded = load_aml(&aml(&format!(
        "network \"main\" {{\n  ssh_from = [\"198.51.100.0/24\"]\n  subnet \"default\" {{ cidr = \"10.0.0.0/24\" }}\n  subnet \"aml\" {{ cidr = \"10.0.1.0/24\" }}\n}}\naml_workspace \"ws\" {{}}\n{}",
        cluster("  network = network.main\n  subnet = \"aml\"")
    )));
    let compute = resource(&loaded, "aml_cluster.c.compute");
    assert_eq!(compute.attrs["subnet"], "network.main.vnet");
    assert_eq!(compute.attrs["subnet_name"], "aml");
    assert!(
        compute
            .depends_on
            .contains(&"network.main.vnet".parse().expect("address"))
    );
}

#[test]
fn workspace_mistakes_are_located_and_explained() {
    assert_eq!(
        problems(&aml(
            "aml_workspace \"a\" {\n  existing = true\n  container_registry = true\n}\naml_workspace \"b\" {\n  resource_group = \"rg\"\n  name = \"-bad\"\n}\n"
        )),
        [
            "aml_workspace \"a\" is an existing workspace without a `name`",
            "aml_workspace \"a\" is existing: `container_registry` has no effect",
            "aml_workspace \"b\" is created by dsinfra: `resource_group` is for existing workspaces",
            "invalid workspace name `-bad`",
        ]
    );
}

#[test]
fn cluster_mistakes_are_located_and_explained() {
    let text = aml(&format!(
        "aml_workspace \"a\" {{}}\naml_workspace \"b\" {{}}\nnetwork \"n\" {{ ssh_from = [\"198.51.100.0/24\"] }}\n\
         aml_cluster \"many\" {{\n  size = \"Standard_ND40rs_v2\"\n  ssh_key = \"{KEY}\"\n}}\n\
         aml_cluster \"bad\" {{\n  workspace = network.n\n  size = \"Standard_ND40s_v2\"\n  count = 0\n  ssh_key = [\"{KEY}\", \"{KEY}\"]\n  priority = \"spot\"\n  idle_seconds_before_scaledown = -1\n  admin_username = \"root\"\n  subnet = \"x\"\n  name = \"9lives\"\n}}\n"
    ));
    assert_eq!(
        problems(&text),
        [
            "aml_cluster \"many\" must say which workspace it uses",
            "`workspace` in aml_cluster \"bad\" must refer to an aml_workspace",
            "unknown VM size `Standard_ND40s_v2` in aml_cluster \"bad\"",
            "`count` in aml_cluster \"bad\" must be between 1 and 1000 nodes",
            "`ssh_key` in aml_cluster \"bad\" lists 2 keys",
            "`priority` in aml_cluster \"bad\" must be one of: dedicated, low_priority",
            "`idle_seconds_before_scaledown` in aml_cluster \"bad\" must not be negative",
            "invalid `admin_username` in aml_cluster \"bad\"",
            "`subnet` in aml_cluster \"bad\" needs a `network`",
            "invalid AmlCompute name `9lives`",
        ]
    );
    assert_eq!(
        problems(&aml(&cluster(""))),
        ["aml_cluster \"c\" needs a workspace"]
    );
}

#[test]
fn the_example_reproduces_the_beeond_tutorial() {
    let loaded = load_example("aml-beeond.hcl");
    let compute = resource(&loaded, "aml_cluster.beeond.compute");
    assert_eq!(compute.attrs["size"], "Standard_ND40rs_v2");
    assert_eq!(compute.attrs["count"], 4);
    let kinds: Vec<&str> = loaded
        .desired
        .steps
        .iter()
        .map(|s| s.kind.as_str())
        .collect();
    assert_eq!(kinds, ["beeond", "stage", "elbencho"]);
    assert!(resource(&loaded, "aml_workspace.ws.workspace").kind == ResourceKind::MlWorkspace);
}

#[test]
fn temp_disk_steps_are_checked_against_the_cluster_size() {
    let text = aml(&format!(
        "aml_workspace \"ws\" {{}}\naml_cluster \"c\" {{\n  size = \"Standard_D4s_v5\"\n  count = 2\n  ssh_key = \"{KEY}\"\n  step \"beeond\" {{}}\n}}\n"
    ));
    assert_eq!(
        problems(&text),
        [
            "step \"beeond\" of aml_cluster \"c\" keeps `data_dir` on the temp disk, but Standard_D4s_v5 has none"
        ]
    );
}

#[test]
fn references_read_what_a_cluster_exposes() {
    let loaded = load_aml(&aml(&format!(
        "aml_workspace \"ws\" {{}}\n{}\noutput \"o\" {{ value = \"${{aml_cluster.c.size}}/${{aml_cluster.c.count}}/${{aml_cluster.c.admin_username}}/${{aml_workspace.ws.name}}/${{aml_workspace.ws.resource_group}}\" }}\n",
        cluster("")
    )));
    assert_eq!(
        loaded.desired.outputs[0].value,
        json!("Standard_ND40rs_v2/4/azureuser/aml-ws/dsinfra-aml")
    );
}

#[test]
fn a_new_workspace_exposes_the_experiments_resource_group() {
    let loaded = load_aml(
        "aml_workspace \"ws\" {}\nazure {\n  location = \"eastus\"\n  resource_group = \"my-rg\"\n}\noutput \"g\" { value = aml_workspace.ws.resource_group }\n",
    );
    assert_eq!(loaded.desired.outputs[0].value, json!("my-rg"));
    assert_eq!(
        resource(&loaded, "aml_workspace.ws.workspace").resource_group,
        "my-rg"
    );
}

#[test]
fn counts_above_amls_limits_warn_by_family() {
    let warnings = |size: &str, count: u32| -> Vec<String> {
        let text = aml(&format!(
            "aml_workspace \"ws\" {{}}\naml_cluster \"c\" {{\n  size = \"{size}\"\n  count = {count}\n  ssh_key = \"{KEY}\"\n}}\n"
        ));
        load_aml(&text)
            .warnings
            .iter()
            .map(|w| w.summary.clone())
            .collect()
    };
    assert!(warnings("Standard_ND40rs_v2", 100).is_empty());
    assert_eq!(
        warnings("Standard_ND40rs_v2", 101),
        [
            "aml_cluster \"c\" has 101 nodes, above Azure Machine Learning's limit of 100 per cluster"
        ]
    );
    assert!(warnings("Standard_D8ds_v5", 300).is_empty());
    assert_eq!(warnings("Standard_D8ds_v5", 301).len(), 1);
}
