//! Issue 15's "done when", through the real binary: the sizes the issue names validate with
//! their facts, and the same manifest planned in two regions shows each region's own price of
//! Standard_D8s_v5 with the price list's date. Expected prices are read from the shipped CSV,
//! so the test holds for any regenerated catalog.

use std::path::Path;

use assert_cmd::Command;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra";

fn dsinfra(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("DSINFRA_EMULATOR_LATENCY_SCALE", "0")
        .env_remove("AZURE_SUBSCRIPTION_ID");
    cmd
}

/// `linux_payg` of `size` in `region`, straight from data/catalog/vm-prices.csv.
fn csv_price(size: &str, region: &str) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/catalog/vm-prices.csv"),
    )
    .expect("the shipped prices");
    text.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.len() == 4 && f[0] == size && f[1] == region)
        .map_or_else(
            || panic!("{size} has a {region} price"),
            |f| f[2].to_owned(),
        )
}

/// `# prices-date:` of the shipped prices.
fn prices_date() -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/catalog/vm-prices.csv"),
    )
    .expect("the shipped prices");
    text.lines()
        .find_map(|l| l.strip_prefix("# prices-date: "))
        .expect("a prices date")
        .trim()
        .to_owned()
}

fn write(dir: &Path, text: &str) {
    std::fs::write(dir.join("exp.hcl"), text).expect("write the manifest");
}

#[test]
fn the_issues_sizes_validate_with_their_facts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let vm = |label: &str, size: &str, cluster: bool| {
        format!(
            "{} \"{label}\" {{\n  size    = \"{size}\"\n{}  image   = \"hpc-ubuntu-22.04\"\n  ssh_key = \"{KEY}\"\n}}\n",
            if cluster { "cluster" } else { "vm" },
            if cluster { "  count   = 2\n" } else { "" },
        )
    };
    // eastus2 offers all five (ND H200 is not offered in eastus).
    let manifest = [
        "experiment = \"sizes\"\nazure { location = \"eastus2\" }\nnetwork \"main\" { ssh_from = [\"198.51.100.0/24\"] }\n".to_owned(),
        vm("d8ds", "Standard_D8ds_v5", false),
        vm("e16ds", "Standard_E16ds_v5", false),
        vm("h100", "Standard_NC40ads_H100_v5", false),
        vm("h200", "Standard_ND96isr_H200_v5", true),
        vm("hb", "Standard_HB176rs_v4", true),
    ]
    .concat();
    write(dir.path(), &manifest);
    let ok = dsinfra(dir.path())
        .args(["validate", "exp.hcl"])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&ok.get_output().stdout).into_owned();
    assert!(out.contains("is valid"), "{out}");
    // Their facts, as `dsinfra sizes --json` reports them from the same catalog.
    let json = dsinfra(dir.path())
        .args(["sizes", "--region", "eastus2", "--json"])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&json.get_output().stdout).expect("JSON rows");
    let facts = |name: &str| {
        let row = rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        (
            row["vcpus"].as_u64(),
            row["gpus"].as_f64(),
            row["temp_disk_gib"].as_u64(),
            row["infiniband"].as_bool(),
        )
    };
    assert_eq!(
        facts("Standard_D8ds_v5"),
        (Some(8), Some(0.0), Some(300), Some(false))
    );
    assert_eq!(
        facts("Standard_E16ds_v5"),
        (Some(16), Some(0.0), Some(600), Some(false))
    );
    assert_eq!(
        facts("Standard_NC40ads_H100_v5"),
        (Some(40), Some(1.0), Some(3576), Some(false))
    );
    assert_eq!(
        facts("Standard_ND96isr_H200_v5"),
        (Some(96), Some(8.0), Some(1024), Some(true))
    );
    assert_eq!(
        facts("Standard_HB176rs_v4"),
        (Some(176), Some(0.0), Some(480), Some(true))
    );
}

#[test]
fn the_same_manifest_is_priced_in_each_regions_own_prices() {
    let date = prices_date();
    let mut seen = Vec::new();
    for region in ["eastus", "westeurope"] {
        let dir = tempfile::tempdir().expect("temp dir");
        write(
            dir.path(),
            &format!(
                "experiment = \"cost\"\nazure {{ location = \"{region}\" }}\nnetwork \"main\" {{ ssh_from = [\"198.51.100.0/24\"] }}\nvm \"prep\" {{\n  size    = \"Standard_D8s_v5\"\n  ssh_key = \"{KEY}\"\n}}\n"
            ),
        );
        let plan = dsinfra(dir.path())
            .args(["plan", "exp.hcl", "--emulator"])
            .assert()
            .success();
        let out = String::from_utf8_lossy(&plan.get_output().stdout).into_owned();
        assert!(
            out.contains(&format!(
                "Cost (pay-as-you-go Linux prices in {region}, Azure's price list of {date}):"
            )),
            "{out}"
        );
        let price: f64 = csv_price("Standard_D8s_v5", region)
            .parse()
            .expect("a price");
        let line = out
            .lines()
            .find(|l| l.contains("vm.prep.vm") && l.contains("Standard_D8s_v5"))
            .unwrap_or_else(|| panic!("a cost line for the VM in {out}"));
        // With its OS disk: Ubuntu's 30 GiB at the default StandardSSD_LRS.
        let disk = dsinfra::catalog::disk_price_per_hour("StandardSSD_LRS", 30);
        assert!(
            line.contains("Standard_D8s_v5 + 30 GiB StandardSSD_LRS OS disk"),
            "{region}: {line}"
        );
        assert!(
            line.contains(&format!("{:.3}", price + disk)),
            "{region}: {line}"
        );
        seen.push(price);
    }
    assert!(
        seen[0] < seen[1],
        "westeurope costs more than eastus: {seen:?}"
    );
}
