//! Tests of the whole pipeline: the seed examples, every example and template, and behaviour
//! that spans stages (dependencies, tags, steps, hashing). The corpus in tests/corpus/ pins the
//! exact rendering of errors.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::addr::Address;
use crate::model::{ResourceKind, RunPolicy, StepScope};

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Options whose HOME holds `.ssh/id_ed25519.pub` (the templates read it) and nothing else.
fn opts_with_home(home: &Path) -> LoadOptions {
    let home = home.to_string_lossy().into_owned();
    LoadOptions {
        env: Box::new(move |name| (name == "HOME").then(|| home.clone())),
        ..LoadOptions::default()
    }
}

fn fake_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".ssh")).expect("mkdir");
    std::fs::write(dir.path().join(".ssh/id_ed25519.pub"), format!("{KEY}\n")).expect("write key");
    dir
}

fn render(failed: &LoadFailed) -> String {
    crate::diag::render_all(&failed.diagnostics, &failed.sources)
}

fn load_ok(path: &Path, text: &str, opts: &LoadOptions) -> Loaded {
    load_str(path, text, opts).unwrap_or_else(|failed| panic!("{}", render(&failed)))
}

fn load_example(name: &str) -> Loaded {
    let path = crate_dir().join("examples").join(name);
    let home = fake_home();
    load(&path, &opts_with_home(home.path()))
        .unwrap_or_else(|failed| panic!("{name}:\n{}", render(&failed)))
}

fn addresses(loaded: &Loaded) -> Vec<String> {
    loaded
        .desired
        .resources
        .iter()
        .map(|r| r.address.to_string())
        .collect()
}

fn resource<'a>(loaded: &'a Loaded, address: &str) -> &'a crate::model::Resource {
    let address: Address = address.parse().expect("valid address");
    loaded
        .desired
        .resource(&address)
        .unwrap_or_else(|| panic!("no {address}"))
}

#[test]
fn dual_dsvm_expands_to_the_expected_resources() {
    let loaded = load_example("dual-dsvm.hcl");
    assert_eq!(
        addresses(&loaded),
        [
            "azure.resource_group",
            "network.main.nsg",
            "network.main.vnet",
            "storage_account.data.account",
            "storage_account.data.container.datasets",
            "vm.gpu.auto_shutdown",
            "vm.gpu.nic",
            "vm.gpu.public_ip",
            "vm.gpu.vm",
            "vm.prep.nic",
            "vm.prep.public_ip",
            "vm.prep.vm",
        ]
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let d = &loaded.desired;
    assert_eq!(d.experiment, "dual-dsvm");
    assert_eq!(d.azure.resource_group, "dsinfra-dual-dsvm");
    // Both sizes boot either generation: the alias picks Generation 2 (images.rs tests the
    // Gen1-only sizes).
    assert_eq!(
        resource(&loaded, "vm.prep.vm").attrs["image"]["sku"],
        "2204-gen2"
    );
    assert_eq!(
        resource(&loaded, "vm.gpu.vm").attrs["image"]["sku"],
        "2204-gen2"
    );
    let shutdown = resource(&loaded, "vm.gpu.auto_shutdown");
    assert_eq!(shutdown.name, "shutdown-computevm-dual-dsvm-gpu");
    assert_eq!(shutdown.attrs["time"], "1900");
    assert_eq!(shutdown.attrs["vm"], "vm.gpu.vm");
    let steps: Vec<(&str, &str)> = d
        .steps
        .iter()
        .map(|s| (s.block.name.as_str(), s.kind.as_str()))
        .collect();
    assert_eq!(steps, [("prep", "blobfuse2"), ("gpu", "blobfuse2")]);
    let step = &d.steps[1];
    assert_eq!(
        step.params["container"],
        "storage_account.data.container.datasets"
    );
    assert_eq!(step.params["cache_dir"], "{temp}/blobfuse2");
    assert_eq!(step.run, RunPolicy::PerBoot);
    assert_eq!(
        d.outputs[0].value,
        json!("(known after apply: vm.gpu.public_ip.ip_address)")
    );
}

#[test]
fn cosmoflow_expands_to_the_expected_resources() {
    let loaded = load_example("nd40-beeond.hcl");
    assert_eq!(
        addresses(&loaded),
        [
            "azure.resource_group",
            "cluster.train.availability_set",
            "cluster.train.ppg",
            "cluster.train[0].nic",
            "cluster.train[0].public_ip",
            "cluster.train[0].vm",
            "cluster.train[1].nic",
            "cluster.train[1].vm",
            "cluster.train[2].nic",
            "cluster.train[2].vm",
            "cluster.train[3].nic",
            "cluster.train[3].vm",
            "network.hpc.nsg",
            "network.hpc.vnet",
            "sas.read",
            "storage_account.data.account",
            "storage_account.data.container.cosmoflow",
            "storage_account.data.file_share.results",
        ]
    );
    let node = resource(&loaded, "cluster.train[3].vm");
    assert_eq!(node.name, "cosmoflow-train-3");
    assert_eq!(node.attrs["proximity_placement_group"], "cluster.train.ppg");
    // One InfiniBand fabric: every node in the cluster's availability set, which is in the PPG.
    assert_eq!(
        node.attrs["availability_set"],
        "cluster.train.availability_set"
    );
    assert!(
        node.depends_on
            .contains(&"cluster.train.availability_set".parse().expect("valid"))
    );
    let set = resource(&loaded, "cluster.train.availability_set");
    assert_eq!(set.kind, ResourceKind::AvailabilitySet);
    assert_eq!(set.name, "cosmoflow-train-avset");
    assert_eq!(set.attrs["proximity_placement_group"], "cluster.train.ppg");
    assert_eq!(node.attrs["image"]["offer"], "ubuntu-hpc");
    assert!(
        node.depends_on
            .contains(&"cluster.train.ppg".parse().expect("valid"))
    );
    assert_eq!(
        resource(&loaded, "cluster.train[3].nic").attrs["public_ip"],
        Json::Null
    );
    assert_eq!(
        resource(&loaded, "cluster.train[0].nic").attrs["accelerated_networking"],
        true
    );
    let sas = resource(&loaded, "sas.read");
    assert_eq!(sas.kind, ResourceKind::Sas);
    assert_eq!(sas.attrs["permissions"], "rl");
    assert_eq!(sas.attrs["expires_in"], "72h");
    assert_eq!(
        sas.attrs["scope"],
        "storage_account.data.container.cosmoflow"
    );
    assert!(
        !sas.attrs.contains_key("tags"),
        "a SAS is not an ARM resource"
    );
    let kinds: Vec<&str> = loaded
        .desired
        .steps
        .iter()
        .map(|s| s.kind.as_str())
        .collect();
    assert_eq!(kinds, ["mofed", "beeond", "stage"]);
    let beeond = &loaded.desired.steps[1];
    assert_eq!(beeond.params["mount"], "/mnt/scratch");
    assert_eq!(beeond.params["interface"], "ib0");
    let stage = &loaded.desired.steps[2];
    assert_eq!(stage.params["sas"], "sas.read");
    assert_eq!(stage.params["decompress"], true);
    assert_eq!(stage.scope, StepScope::All);
}

#[test]
fn every_resource_is_tagged_and_depends_on_the_resource_group() {
    for example in ["dual-dsvm.hcl", "nd40-beeond.hcl"] {
        let loaded = load_example(example);
        let rg: Address = "azure.resource_group".parse().expect("valid");
        for r in &loaded.desired.resources {
            if r.kind.is_arm() {
                let tags = &r.attrs["tags"];
                assert_eq!(tags["dsinfra-address"], r.address.to_string());
                assert_eq!(tags["dsinfra-experiment"], loaded.desired.experiment);
                assert_eq!(tags["managed-by"], "dsinfra");
            }
            if r.kind != ResourceKind::ResourceGroup {
                assert!(
                    r.depends_on.contains(&rg),
                    "{} depends on the group",
                    r.address
                );
            }
            assert!(r.span.is_some(), "{} is located", r.address);
        }
    }
}

#[test]
fn generated_names_are_valid_and_deterministic() {
    for example in ["dual-dsvm.hcl", "nd40-beeond.hcl"] {
        let first = load_example(example);
        let second = load_example(example);
        assert_eq!(
            first.desired, second.desired,
            "{example} loads the same twice"
        );
        for r in &first.desired.resources {
            assert_eq!(
                names::check(r.kind, &r.name),
                Ok(()),
                "{}: {}",
                r.address,
                r.name
            );
        }
    }
}

#[test]
fn dependencies_never_point_at_missing_resources_and_have_no_cycles() {
    for example in ["dual-dsvm.hcl", "nd40-beeond.hcl"] {
        let loaded = load_example(example);
        let all: BTreeSet<&Address> = loaded
            .desired
            .resources
            .iter()
            .map(|r| &r.address)
            .collect();
        for r in &loaded.desired.resources {
            for dep in &r.depends_on {
                assert!(all.contains(dep), "{} depends on missing {dep}", r.address);
            }
        }
        // Kahn's algorithm: every resource can be ordered.
        let mut done: BTreeSet<Address> = BTreeSet::new();
        while done.len() < all.len() {
            let ready: Vec<Address> = loaded
                .desired
                .resources
                .iter()
                .filter(|r| {
                    !done.contains(&r.address) && r.depends_on.iter().all(|d| done.contains(d))
                })
                .map(|r| r.address.clone())
                .collect();
            assert!(!ready.is_empty(), "{example} has a dependency cycle");
            done.extend(ready);
        }
    }
}

#[test]
fn every_example_and_template_loads() {
    let home = fake_home();
    let opts = opts_with_home(home.path());
    let mut examples: Vec<PathBuf> = std::fs::read_dir(crate_dir().join("examples"))
        .expect("examples dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hcl"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 4, "seeds plus smaller examples");
    for path in &examples {
        if let Err(failed) = load(path, &opts) {
            panic!("{}:\n{}", path.display(), render(&failed));
        }
    }
    let with_ip = LoadOptions {
        vars: vec![("my_ip".into(), "198.51.100.7/32".into())],
        ..opts_with_home(home.path())
    };
    for (name, _, text) in starter_templates() {
        let path = PathBuf::from(format!("{name}.hcl"));
        let loaded =
            load_str(&path, text, &with_ip).unwrap_or_else(|f| panic!("{name}:\n{}", render(&f)));
        assert!(loaded.warnings.is_empty(), "{name}: {:?}", loaded.warnings);
        assert_eq!(
            format(&path, text).ok().as_deref(),
            Some(*text),
            "{name} is formatted"
        );
    }
}

#[test]
fn examples_are_short_and_formatted() {
    for name in ["dual-dsvm.hcl", "nd40-beeond.hcl"] {
        let text = std::fs::read_to_string(crate_dir().join("examples").join(name)).expect("read");
        assert!(text.lines().count() <= 40, "{name} fits in 40 lines");
        assert_eq!(
            format(Path::new(name), &text).ok().as_deref(),
            Some(text.as_str()),
            "{name} is formatted"
        );
    }
}

fn minimal(extra: &str) -> String {
    format!(
        "azure {{ location = \"eastus\" }}\nnetwork \"main\" {{ ssh_from = [\"198.51.100.0/24\"] }}\n\
         vm \"gpu\" {{\n  size    = \"Standard_NC4as_T4_v3\"\n  ssh_key = \"{KEY}\"\n}}\n{extra}"
    )
}

/// Only InfiniBand sizes need a fabric: a cluster of another size gets no availability set, and
/// its VMs no `availability_set` attribute (their plans and states stay as they were).
#[test]
fn a_cluster_without_infiniband_gets_no_availability_set() {
    let text = minimal(&format!(
        "cluster \"cpu\" {{\n  size    = \"Standard_D4s_v5\"\n  count   = 2\n  ssh_key = \"{KEY}\"\n}}\n"
    ));
    let loaded = load_ok(Path::new("cpu.hcl"), &text, &LoadOptions::default());
    assert!(
        addresses(&loaded)
            .iter()
            .all(|a| !a.contains("availability_set")),
        "{:?}",
        addresses(&loaded)
    );
    let node = resource(&loaded, "cluster.cpu[1].vm");
    assert!(!node.attrs.contains_key("availability_set"));
}

#[test]
fn experiment_defaults_to_the_sanitised_file_stem() {
    let loaded = load_ok(
        Path::new("dir/My Experiment_1.hcl"),
        &minimal(""),
        &LoadOptions::default(),
    );
    assert_eq!(loaded.desired.experiment, "my-experiment-1");
    assert_eq!(resource(&loaded, "vm.gpu.vm").name, "my-experiment-1-gpu");
    // The default image alias picks Gen2 for NC6s_v3 and the NIC gets the only network.
    assert_eq!(
        resource(&loaded, "vm.gpu.vm").attrs["image"]["sku"],
        "22_04-lts-gen2"
    );
    assert_eq!(
        resource(&loaded, "vm.gpu.nic").attrs["subnet"],
        "network.main.vnet"
    );
    assert_eq!(
        resource(&loaded, "vm.gpu.nic").attrs["subnet_name"],
        "default"
    );
    assert_eq!(
        resource(&loaded, "network.main.vnet").attrs["subnets"][0]["address_prefix"],
        "10.0.0.0/24"
    );
}

#[test]
fn subscription_comes_from_the_environment_when_not_written() {
    let opts = LoadOptions {
        env: Box::new(|name| (name == "AZURE_SUBSCRIPTION_ID").then(|| "sub-1".to_owned())),
        ..LoadOptions::default()
    };
    let loaded = load_ok(Path::new("x.hcl"), &minimal(""), &opts);
    assert_eq!(loaded.desired.azure.subscription.as_deref(), Some("sub-1"));
    let none = load_ok(Path::new("x.hcl"), &minimal(""), &LoadOptions::default());
    assert_eq!(none.desired.azure.subscription, None);
}

#[test]
fn references_between_blocks_become_dependencies_and_values() {
    let text = minimal(
        "storage_account \"data\" {\n  container \"raw\" {}\n}\n\
         disk \"scratch\" {\n  size_gb   = 256\n  attach_to = vm.gpu\n  lun       = 2\n}\n\
         locals { size = vm.gpu.size }\n\
         vm \"cpu\" {\n  size    = \"Standard_D4s_v5\"\n  ssh_key = \"${local.key}\"\n  admin_username = lower(\"DATA${storage_account.data.name}\")\n}\n\
         locals { key = \"{KEY}\" }\noutput \"size\" { value = local.size }\n"
            .replace("{KEY}", KEY)
            .as_str(),
    );
    let loaded = load_ok(Path::new("refs.hcl"), &text, &LoadOptions::default());
    let gpu = resource(&loaded, "vm.gpu.vm");
    assert_eq!(
        gpu.attrs["data_disks"],
        json!([{"lun": 2, "disk": "disk.scratch"}])
    );
    assert!(
        gpu.depends_on
            .contains(&"disk.scratch".parse().expect("valid"))
    );
    let disk = resource(&loaded, "disk.scratch");
    assert!(
        !disk
            .depends_on
            .contains(&"vm.gpu.vm".parse().expect("valid")),
        "attachment is the VM's dependency"
    );
    let cpu = resource(&loaded, "vm.cpu.vm");
    let account = resource(&loaded, "storage_account.data.account");
    assert_eq!(
        cpu.attrs["admin_username"],
        json!(format!("data{}", account.name))
    );
    assert!(cpu.depends_on.contains(&account.address));
    assert_eq!(loaded.desired.outputs[0].value, "Standard_NC4as_T4_v3");
}

#[test]
fn manifest_hash_binds_text_and_variable_values() {
    let text = format!("variable \"n\" {{ default = 1 }}\n{}", minimal(""));
    let a = load_ok(Path::new("h.hcl"), &text, &LoadOptions::default());
    let b = load_ok(Path::new("h.hcl"), &text, &LoadOptions::default());
    let c = load_ok(
        Path::new("h.hcl"),
        &text,
        &LoadOptions {
            vars: vec![("n".into(), "2".into())],
            ..LoadOptions::default()
        },
    );
    let d = load_ok(
        Path::new("h.hcl"),
        &format!("{text}\n"),
        &LoadOptions::default(),
    );
    assert_eq!(a.desired.manifest_hash, b.desired.manifest_hash);
    assert_ne!(a.desired.manifest_hash, c.desired.manifest_hash);
    assert_ne!(a.desired.manifest_hash, d.desired.manifest_hash);
    assert_eq!(a.desired.manifest_hash.len(), 64);
}

#[test]
fn variables_take_var_files_then_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vars = dir.path().join("v.hcl");
    std::fs::write(&vars, "nodes = 3\nzone = \"2\"\n").expect("write");
    let text = format!(
        "variable \"nodes\" {{ type = number }}\nvariable \"zone\" {{ default = \"1\" }}\n{}\
         cluster \"c\" {{\n  size    = \"Standard_D4s_v5\"\n  count   = var.nodes\n  zone    = var.zone\n  ssh_key = \"{KEY}\"\n}}\n",
        minimal("")
    );
    let opts = LoadOptions {
        vars: vec![("nodes".into(), "5".into())],
        var_files: vec![vars],
        ..LoadOptions::default()
    };
    let loaded = load_ok(Path::new("v.hcl"), &text, &opts);
    assert!(
        loaded
            .desired
            .resource(&"cluster.c[4].vm".parse().expect("valid"))
            .is_some()
    );
    assert!(
        loaded
            .desired
            .resource(&"cluster.c[5].vm".parse().expect("valid"))
            .is_none()
    );
    assert_eq!(resource(&loaded, "cluster.c[0].vm").attrs["zone"], "2");
}

#[test]
fn never_panics_on_mangled_input() {
    let seed = std::fs::read_to_string(crate_dir().join("examples/nd40-beeond.hcl")).expect("read");
    // Cut the seed at every 7th byte boundary and swap some characters: each must give a
    // result or diagnostics, never a panic.
    for cut in (0..seed.len()).step_by(7) {
        if !seed.is_char_boundary(cut) {
            continue;
        }
        let _ = load_str(Path::new("cut.hcl"), &seed[..cut], &LoadOptions::default());
        let swapped = format!("{}}}{}", &seed[..cut], &seed[cut..]);
        let _ = load_str(Path::new("swap.hcl"), &swapped, &LoadOptions::default());
        let _ = format(Path::new("cut.hcl"), &seed[..cut]);
    }
}

#[test]
fn docs_describe_every_step_kind() {
    let docs =
        std::fs::read_to_string(crate_dir().join("docs/manifest.md")).expect("docs/manifest.md");
    for kind in step_kinds::KINDS {
        assert!(
            docs.contains(&format!("`{}`", kind.name)),
            "docs mention step {}",
            kind.name
        );
        assert!(
            docs.contains(kind.summary),
            "docs carry the summary of {}",
            kind.name
        );
        for param in kind.params {
            assert!(
                docs.contains(&format!("`{}`", param.name)),
                "docs mention {}.{}",
                kind.name,
                param.name
            );
        }
    }
    for alias in images::alias_names() {
        assert!(docs.contains(alias), "docs mention image {alias}");
    }
}

/// Issue 13 item 13: each block's VMs state Trusted Launch, Secure Boot and vTPM; blocks that
/// build kernel modules get Secure Boot off with a note saying why; the manifest can override.
#[test]
fn security_follows_the_steps_and_the_manifest_overrides_it() {
    // ND40rs_v2 and D4s_v5 accept Trusted Launch, and ubuntu-22.04 advertises it.
    let text = format!(
        r#"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["198.51.100.0/24"] }}
cluster "ib" {{
  size    = "Standard_ND40rs_v2"
  image   = "ubuntu-22.04"
  count   = 2
  ssh_key = "{KEY}"
  step "beeond" {{ mount = "/mnt/beeond" }}
}}
cluster "strict" {{
  size        = "Standard_ND40rs_v2"
  image       = "ubuntu-22.04"
  secure_boot = true
  ssh_key     = "{KEY}"
  step "beeond" {{ mount = "/mnt/beeond" }}
}}
vm "plain" {{
  size    = "Standard_D4s_v5"
  image   = "ubuntu-22.04"
  ssh_key = "{KEY}"
}}
vm "loose" {{
  size        = "Standard_D4s_v5"
  image       = "ubuntu-22.04"
  secure_boot = false
  ssh_key     = "{KEY}"
}}
vm "standard" {{
  size           = "Standard_D4s_v5"
  trusted_launch = false
  ssh_key        = "{KEY}"
}}
"#
    );
    let loaded = load_ok(Path::new("security.hcl"), &text, &LoadOptions::default());
    let security = |address: &str| resource(&loaded, address).attrs["security"].clone();
    let tl = |secure_boot: bool| json!({"type": "TrustedLaunch", "secure_boot": secure_boot, "vtpm": true});
    assert_eq!(security("cluster.ib[1].vm"), tl(false));
    assert_eq!(security("cluster.strict[0].vm"), tl(true));
    assert_eq!(security("vm.plain.vm"), tl(true));
    assert_eq!(security("vm.loose.vm"), tl(false));
    assert_eq!(
        security("vm.standard.vm"),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "asked": true})
    );
    let notes: Vec<String> = loaded
        .desired
        .notes
        .iter()
        .map(|(block, note)| format!("{block}: {note}"))
        .collect();
    assert_eq!(
        notes,
        [
            "cluster.ib: Trusted Launch with Secure Boot off: its beeond step builds kernel modules, which Secure Boot would refuse to load (`secure_boot = true` keeps it on; the kernel-module steps then refuse to start)",
            "vm.loose: Trusted Launch with Secure Boot off: `secure_boot = false` in the manifest",
            "vm.standard: no Trusted Launch (no Secure Boot, no vTPM): `trusted_launch = false` in the manifest",
        ]
    );
    let warnings: Vec<&str> = loaded.warnings.iter().map(|w| w.summary.as_str()).collect();
    assert!(
        warnings.contains(
            &"Secure Boot on cluster \"strict\", whose beeond step builds kernel modules"
        ),
        "{warnings:?}"
    );
}

/// Issue 29 item 9: a D8ds_v6 block whose steps use `{temp}` gets a per-boot step that mounts
/// the local NVMe as the temp disk, before its other steps; a v5 `d` size (a temp disk mounted
/// by Azure) gets none.
#[test]
fn an_nvme_only_size_gets_a_step_that_mounts_its_nvme_as_the_temp_disk() {
    let manifest = |size: &str| {
        format!(
            r#"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["198.51.100.0/24"] }}
cluster "scratch" {{
  size    = "{size}"
  image   = "ubuntu-22.04"
  count   = 2
  ssh_key = "{KEY}"
  step "beeond" {{ mount = "/mnt/beeond" }}
}}
"#
        )
    };
    let loaded = load_ok(
        Path::new("nvme.hcl"),
        &manifest("Standard_D8ds_v6"),
        &LoadOptions::default(),
    );
    let steps: Vec<(&str, &str, RunPolicy)> = loaded
        .desired
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.kind.as_str(), s.run))
        .collect();
    assert_eq!(
        steps,
        [
            ("nvme_temp", "nvme_temp", RunPolicy::PerBoot),
            ("beeond", "beeond", RunPolicy::PerBoot),
        ]
    );
    let v5 = load_ok(
        Path::new("nvme.hcl"),
        &manifest("Standard_D8ds_v5"),
        &LoadOptions::default(),
    );
    assert!(v5.desired.steps.iter().all(|s| s.kind != "nvme_temp"));
}

/// Issue 29's first "done when": templates/cluster.hcl (ND96asr_v4, which ARM refuses Trusted
/// Launch on) plans no Trusted Launch, and the flagship states no profile offline (its HPC image's
/// support is read from Azure when connected), with Secure Boot off either way.
#[test]
fn the_cluster_template_sends_no_trusted_launch_and_the_flagship_waits_for_azure() {
    let home = fake_home();
    let with_ip = LoadOptions {
        vars: vec![("my_ip".into(), "198.51.100.7/32".into())],
        ..opts_with_home(home.path())
    };
    let (_, _, text) = starter_templates()
        .iter()
        .find(|(name, _, _)| *name == "cluster")
        .expect("the cluster template");
    let loaded = load_str(Path::new("cluster.hcl"), text, &with_ip)
        .unwrap_or_else(|f| panic!("{}", render(&f)));
    for i in 0..2 {
        assert_eq!(
            resource(&loaded, &format!("cluster.train[{i}].vm")).attrs["security"],
            json!({"type": "Standard", "secure_boot": false, "vtpm": false})
        );
    }
    let flagship = load_example("nd40-beeond.hcl");
    assert_eq!(
        resource(&flagship, "cluster.train[0].vm").attrs["security"],
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "if_supported": {"secure_boot": false}})
    );
}

/// Issue 29 items 2 and 3: Trusted Launch was stated for every Generation 2 block, and ARM
/// refuses it on sizes marked TrustedLaunchDisabled (templates/cluster.hcl's ND96asr_v4) and on
/// images that do not advertise it. It is stated only where both are known to support it; where
/// either is not known offline the block sends no profile and remembers what it would get.
#[test]
fn trusted_launch_is_stated_only_where_the_size_and_the_image_support_it() {
    let text = format!(
        r#"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["198.51.100.0/24"] }}
cluster "a100" {{
  size    = "Standard_ND96asr_v4"
  image   = "hpc-ubuntu-22.04"
  count   = 2
  ssh_key = "{KEY}"
}}
cluster "v100" {{
  size    = "Standard_ND40rs_v2"
  image   = "hpc-ubuntu-22.04"
  count   = 2
  ssh_key = "{KEY}"
}}
vm "asked" {{
  size           = "Standard_ND40rs_v2"
  image          = "hpc-ubuntu-22.04"
  trusted_launch = true
  ssh_key        = "{KEY}"
}}
vm "arm" {{
  size    = "Standard_D4ps_v5"
  image   = "ubuntu-22.04"
  ssh_key = "{KEY}"
}}
"#
    );
    let loaded = load_ok(Path::new("tl.hcl"), &text, &LoadOptions::default());
    let security = |address: &str| resource(&loaded, address).attrs["security"].clone();
    let none = json!({"type": "Standard", "secure_boot": false, "vtpm": false});
    assert_eq!(security("cluster.a100[0].vm"), none);
    assert_eq!(security("vm.arm.vm"), none);
    assert_eq!(
        security("cluster.v100[1].vm"),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "if_supported": {"secure_boot": false}})
    );
    assert_eq!(
        security("vm.asked.vm"),
        json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true})
    );
    let note_of = |block: &str| {
        loaded
            .desired
            .notes
            .iter()
            .find(|(b, _)| b.to_string() == block)
            .map(|(_, n)| n.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        note_of("cluster.a100"),
        "no Trusted Launch: Standard_ND96asr_v4 does not support it (Resource SKUs: TrustedLaunchDisabled)"
    );
    assert!(
        note_of("cluster.v100").starts_with(
            "no securityProfile offline: whether image microsoft-dsvm:ubuntu-hpc:2204-v100:latest supports Trusted Launch is not known here"
        ) && note_of("cluster.v100").ends_with("Where both support it: Trusted Launch with Secure Boot off: its InfiniBand drivers build kernel modules, which Secure Boot would refuse to load (`secure_boot = true` keeps it on; the kernel-module steps then refuse to start)"),
        "{}",
        note_of("cluster.v100")
    );

    // Asking for Trusted Launch or Secure Boot where Azure refuses it is an error at the line.
    let refused = format!(
        r#"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["198.51.100.0/24"] }}
cluster "a100" {{
  size        = "Standard_ND96asr_v4"
  image       = "hpc-ubuntu-22.04"
  secure_boot = true
  ssh_key     = "{KEY}"
}}
"#
    );
    let Err(failed) = load_str(Path::new("tl.hcl"), &refused, &LoadOptions::default()) else {
        panic!("Trusted Launch on ND96asr_v4 must be refused");
    };
    let error = failed
        .diagnostics
        .iter()
        .find(|d| d.summary.contains("cannot use Trusted Launch"))
        .expect("refused");
    assert!(
        error
            .label
            .as_deref()
            .unwrap_or_default()
            .contains("TrustedLaunchDisabled"),
        "{error:?}"
    );
}

/// Issue 29 item 4: a T4 VM on the HPC image got Trusted Launch with Secure Boot on, and the
/// image's NVIDIA driver (built with DKMS, signed by no key the VM trusts) could not load.
#[test]
fn an_nvidia_gpu_gets_secure_boot_off_and_asking_for_it_warns() {
    let text = format!(
        r#"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["198.51.100.0/24"] }}
vm "t4" {{
  size    = "Standard_NC4as_T4_v3"
  image   = "hpc-ubuntu-22.04"
  ssh_key = "{KEY}"
}}
vm "plain" {{
  size    = "Standard_NC4as_T4_v3"
  image   = "ubuntu-22.04"
  ssh_key = "{KEY}"
}}
vm "strict" {{
  size        = "Standard_NC4as_T4_v3"
  image       = "dsvm-ubuntu-22.04"
  secure_boot = true
  ssh_key     = "{KEY}"
}}
"#
    );
    let loaded = load_ok(Path::new("gpu.hcl"), &text, &LoadOptions::default());
    let security = |address: &str| resource(&loaded, address).attrs["security"].clone();
    // Not known offline whether the HPC image supports Trusted Launch; if it does, Secure Boot off.
    assert_eq!(
        security("vm.t4.vm"),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "if_supported": {"secure_boot": false}})
    );
    // Plain Ubuntu supports it: Secure Boot off for a driver installed later.
    assert_eq!(
        security("vm.plain.vm"),
        json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true})
    );
    assert_eq!(
        security("vm.strict.vm"),
        json!({"type": "TrustedLaunch", "secure_boot": true, "vtpm": true})
    );
    let warnings: Vec<&str> = loaded.warnings.iter().map(|w| w.summary.as_str()).collect();
    assert!(
        warnings.contains(&"Secure Boot on vm \"strict\", whose NVIDIA driver is unsigned"),
        "{warnings:?}"
    );
    assert!(
        loaded
            .desired
            .notes
            .iter()
            .any(|(block, note)| block.to_string() == "vm.t4"
                && note.contains("Where both support it: Trusted Launch with Secure Boot off: its image's NVIDIA driver")),
        "{:?}",
        loaded.desired.notes
    );
}

mod aml;
mod idle;

/// Issue 31: a manifest is read (parsed, checked, its variables resolved) once and judged as
/// often as the sizes known change. Judged against the shipped catalog it collects a size Azure
/// added later; judged again against a catalog that learnt the size, the same read manifest
/// evaluates the cluster's `infiniband` from the learnt facts and gives it a fabric.
#[test]
fn a_read_manifest_is_judged_again_against_learnt_sizes_without_a_second_parse() {
    use std::borrow::Cow;
    let text = minimal(&format!(
        "cluster \"big\" {{\n  size    = \"Standard_ND96zz_v9\"\n  count   = 2\n  ssh_key = \"{KEY}\"\n}}\n\
         output \"ib\" {{ value = cluster.big.infiniband }}\n"
    ));
    let opts = LoadOptions::default();
    let read = read_str(Path::new("big.hcl"), &text, &opts).expect("reads");
    let lenient = read
        .judge(read.catalog(), true)
        .expect("unknown sizes are collected");
    assert_eq!(lenient.unknown_sizes, ["Standard_ND96zz_v9"]);
    assert!(
        read.judge(read.catalog(), false).is_err(),
        "unknown without learning"
    );

    let mut catalog = read.catalog().clone();
    let model = crate::catalog::shipped_size("Standard_ND96asr_v4").expect("shipped");
    catalog.learn(crate::catalog::VmSize {
        name: Cow::Owned("Standard_ND96zz_v9".to_owned()),
        facts: Cow::Borrowed(crate::catalog::LIVE_FACTS),
        infiniband: true,
        ..model.clone()
    });
    let judged = read
        .judge(&catalog, false)
        .expect("judged against what was learnt");
    let ib = judged.desired.outputs.iter().find(|o| o.name == "ib");
    assert_eq!(ib.map(|o| &o.value), Some(&serde_json::json!(true)));
    assert!(
        addresses(&judged)
            .iter()
            .any(|a| a.contains("availability_set")),
        "an InfiniBand size gets its fabric: {:?}",
        addresses(&judged)
    );
    assert_eq!(judged.desired.catalog, catalog);
}
