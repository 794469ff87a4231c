//! `dsinfra sizes` as users run it: the real binary, checked against the shipped catalog files.
//!
//! Expected values come from `data/catalog/vm-sizes.csv` and `vm-prices.csv` themselves, read
//! here by a parser of this test's own (not `dsinfra::catalog`), so the test holds when the data
//! is regenerated and catches a listing that drifts from its source: a size left out or added,
//! a price from another region, a fact misread.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use assert_cmd::Command;
use chrono::NaiveDate;
use serde_json::Value;

fn dsinfra() -> Command {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.env("NO_COLOR", "1").env_remove("AZURE_SUBSCRIPTION_ID");
    cmd
}

/// One row of a catalog file: column -> text.
type Row = HashMap<String, String>;

/// A (pay-as-you-go, spot) price in USD per hour.
type Price = (f64, Option<f64>);

/// One catalog file: its `# key: value` comments and its rows.
struct Csv {
    comments: HashMap<String, String>,
    rows: Vec<Row>,
}

fn read_csv(name: &str) -> Csv {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/catalog")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("the catalog file is in the repository");
    let mut comments = HashMap::new();
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            if let Some((key, value)) = comment.trim().split_once(": ") {
                comments.insert(key.to_owned(), value.trim().to_owned());
            }
            continue;
        }
        let fields: Vec<String> = line.split(',').map(str::to_owned).collect();
        match &header {
            None => header = Some(fields),
            Some(columns) => rows.push(columns.iter().cloned().zip(fields).collect()),
        }
    }
    Csv { comments, rows }
}

/// What the two files say, keyed for the checks below.
struct Catalog {
    sizes: Csv,
    prices_file: Csv,
    /// (size, region) -> (pay-as-you-go, spot).
    prices: HashMap<(String, String), Price>,
}

impl Catalog {
    fn read() -> Self {
        let prices_file = read_csv("vm-prices.csv");
        let prices = prices_file
            .rows
            .iter()
            .map(|r| {
                let payg = r["linux_payg"].parse().expect("a price");
                let spot = (!r["spot"].is_empty()).then(|| r["spot"].parse().expect("a price"));
                ((r["name"].clone(), r["region"].clone()), (payg, spot))
            })
            .collect();
        Self {
            sizes: read_csv("vm-sizes.csv"),
            prices_file,
            prices,
        }
    }

    fn size(&self, name: &str) -> &Row {
        self.sizes
            .rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} is in vm-sizes.csv"))
    }

    fn price(&self, name: &str, region: &str) -> Option<Price> {
        self.prices
            .get(&(name.to_owned(), region.to_owned()))
            .copied()
    }

    /// The sizes of `region` that pass `keep` and are not retired as of today, with their
    /// price, as the listing should show them: cheapest first, then by name.
    fn offered(&self, region: &str, keep: impl Fn(&Row) -> bool) -> Vec<(&Row, Price)> {
        let mut rows: Vec<_> = self
            .sizes
            .rows
            .iter()
            .filter(|r| keep(r) && !retired(r))
            .filter_map(|r| Some((r, self.price(&r["name"], region)?)))
            .collect();
        rows.sort_by(|a, b| a.1.0.total_cmp(&b.1.0));
        rows
    }
}

fn gpus(row: &Row) -> f64 {
    row["gpus"].parse().expect("a GPU count")
}

/// Retired on or before today (what the binary hides without --include-retired).
fn retired(row: &Row) -> bool {
    let today = chrono::Utc::now().date_naive();
    let date = &row["retirement_date"];
    !date.is_empty()
        && NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("a retirement date") <= today
}

fn json_of(args: &[&str]) -> Vec<Value> {
    let output = dsinfra().args(args).output().expect("dsinfra runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    parsed.as_array().expect("a JSON array").clone()
}

fn by_name<'a>(rows: &'a [Value], name: &str) -> Option<&'a Value> {
    rows.iter().find(|r| r["name"] == name)
}

#[test]
fn gpu_sizes_in_eastus_are_the_csv_s_with_its_eastus_prices() {
    let catalog = Catalog::read();
    let rows = json_of(&["sizes", "--gpu", "--region", "eastus", "--json"]);
    let expected = catalog.offered("eastus", |r| gpus(r) > 0.0);
    assert!(!expected.is_empty(), "the catalog has GPU sizes in eastus");
    assert_eq!(rows.len(), expected.len());
    let listed: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["name"].as_str().expect("a name"))
        .collect();
    let wanted: BTreeSet<&str> = expected.iter().map(|(r, _)| r["name"].as_str()).collect();
    assert_eq!(listed, wanted);
    for row in &rows {
        let name = row["name"].as_str().expect("a name");
        let csv = catalog.size(name);
        assert!(row["gpus"].as_f64().expect("a count") > 0.0, "{name}");
        assert_eq!(row["region"], "eastus", "{name}");
        let (payg, spot) = catalog.price(name, "eastus").expect("offered in eastus");
        assert_eq!(row["price"].as_f64(), Some(payg), "{name}");
        assert_eq!(row["spot"].as_f64(), spot, "{name}");
        // The facts, as the file states them.
        assert_eq!(row["vcpus"].to_string(), csv["vcpus"], "{name}");
        assert_eq!(
            row["memory_gib"].as_f64(),
            csv["memory_gib"].parse().ok(),
            "{name}"
        );
        assert_eq!(row["gpus"].as_f64(), Some(gpus(csv)), "{name}");
        assert_eq!(row["gpu_model"], csv["gpu_model"].as_str(), "{name}");
        assert_eq!(row["quota_family"], csv["quota_family"].as_str(), "{name}");
        let temp_disk = (!csv["temp_disk_gib"].is_empty()).then(|| csv["temp_disk_gib"].clone());
        assert_eq!(
            row["temp_disk_gib"].as_u64().map(|g| g.to_string()),
            temp_disk,
            "{name}"
        );
        assert_eq!(row["infiniband"], csv["rdma"] == "true", "{name}");
    }
    // Cheapest first.
    let prices: Vec<f64> = rows
        .iter()
        .map(|r| r["price"].as_f64().expect("a price"))
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
}

#[test]
fn spot_checks_of_gpu_sizes_in_eastus() {
    let catalog = Catalog::read();
    let rows = json_of(&["sizes", "--gpu", "--region", "eastus", "--json"]);
    // The single-H100 size: facts from Azure's NC H100 v5 page.
    let h100 = by_name(&rows, "Standard_NC40ads_H100_v5").expect("NC40ads_H100_v5 in eastus");
    assert_eq!(
        (
            &h100["vcpus"],
            &h100["gpus"],
            &h100["gpu_model"],
            &h100["gpu_arch"]
        ),
        (
            &Value::from(40),
            &Value::from(1.0),
            &Value::from("H100-NVL"),
            &Value::from("Hopper")
        )
    );
    assert_eq!(h100["generations"], serde_json::json!([2]));
    // ND40rs_v2: eight V100s on InfiniBand.
    let nd = by_name(&rows, "Standard_ND40rs_v2").expect("ND40rs_v2 in eastus");
    assert_eq!(
        (&nd["vcpus"], &nd["gpus"]),
        (&Value::from(40), &Value::from(8.0))
    );
    assert_eq!(nd["infiniband"], true);
    assert_eq!(nd["gpu_arch"], "Volta");
    // ND H200 is not offered in eastus (the file has no such row), so it is not listed.
    assert!(catalog.size("Standard_ND96isr_H200_v5")["gpus"] != "0");
    assert_eq!(catalog.price("Standard_ND96isr_H200_v5", "eastus"), None);
    assert!(by_name(&rows, "Standard_ND96isr_H200_v5").is_none());
    // NC6s_v3 is offered in eastus but retired on 2025-09-30, so it is hidden.
    assert_eq!(
        catalog.size("Standard_NC6s_v3")["retirement_date"],
        "2025-09-30"
    );
    assert!(catalog.price("Standard_NC6s_v3", "eastus").is_some());
    assert!(by_name(&rows, "Standard_NC6s_v3").is_none());
}

#[test]
fn include_retired_lists_a_retired_size_with_its_date() {
    let rows = json_of(&[
        "sizes",
        "--name",
        "nc6S_V3",
        "--include-retired",
        "--region",
        "eastus",
        "--json",
    ]);
    let names: Vec<&Value> = rows.iter().map(|r| &r["name"]).collect();
    assert_eq!(names, [&Value::from("Standard_NC6s_v3")]);
    assert_eq!(rows[0]["retirement_date"], "2025-09-30");
    assert_eq!(rows[0]["retired"], true);
}

#[test]
fn max_price_keeps_the_sizes_at_or_under_it_in_the_region() {
    let catalog = Catalog::read();
    let rows = json_of(&[
        "sizes",
        "--gpu",
        "--region",
        "eastus",
        "--max-price",
        "1",
        "--json",
    ]);
    let expected = catalog.offered("eastus", |r| gpus(r) > 0.0);
    let expected: Vec<&str> = expected
        .iter()
        .filter(|(_, (payg, _))| *payg <= 1.0)
        .map(|(r, _)| r["name"].as_str())
        .collect();
    assert!(
        !expected.is_empty(),
        "the catalog has a GPU size under $1/h in eastus"
    );
    let listed: Vec<&str> = rows
        .iter()
        .map(|r| r["name"].as_str().expect("a name"))
        .collect();
    // Same sizes, cheapest first (equal prices by name, as the file orders them).
    assert_eq!(listed, expected);
    assert!(
        rows.iter()
            .all(|r| r["price"].as_f64().expect("a price") <= 1.0)
    );
}

#[test]
fn max_price_without_a_region_says_which_flag_is_missing() {
    dsinfra()
        .args(["sizes", "--gpu", "--max-price", "1"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            "error: the following required arguments were not provided:\n  --region <REGION>\n\n\
             Usage: dsinfra sizes --region <REGION> --gpu --max-price <USD>\n\n\
             For more information, try '--help'.\n",
        );
}

#[test]
fn an_unknown_region_is_refused_with_a_suggestion_or_where_to_look() {
    dsinfra()
        .args(["sizes", "--region", "moon"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            "error: there is no Azure region `moon` (--region): give a region's name as ARM \
             spells it, such as eastus, westeurope or southcentralus (`az account \
             list-locations -o table` lists them)\n",
        );
    dsinfra()
        .args(["sizes", "--gpu", "--region", "westeurop"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            "error: there is no Azure region `westeurop` (--region): did you mean `westeurope`?\n",
        );
}

/// The cells of one row of the table as the docs describe them (docs/sizes.md).
fn cells(row: &Row, (payg, spot): Price) -> Vec<String> {
    let money = |v: f64| {
        if v < 1.0 {
            format!("${v:.4}")
        } else {
            format!("${v:.2}")
        }
    };
    let vcpus = match row["vcpus_available"].as_str() {
        "" => row["vcpus"].clone(),
        same if same == row["vcpus"] => row["vcpus"].clone(),
        fewer => format!("{} ({fewer})", row["vcpus"]),
    };
    let gpu_count: f64 = gpus(row);
    let gpus = if gpu_count == 0.0 {
        "-".to_owned()
    } else if gpu_count.fract() == 0.0 {
        format!("{gpu_count} x {}", row["gpu_model"])
    } else {
        format!("{gpu_count:.3} x {}", row["gpu_model"])
    };
    let memory: f64 = row["memory_gib"].parse().expect("memory");
    let yes_no = |text: &str, unknown: &str| match text {
        "true" => "yes".to_owned(),
        "false" => "no".to_owned(),
        _ => unknown.to_owned(),
    };
    let retirement = match row["retirement_date"].as_str() {
        "" => String::new(),
        date => format!("retires {date}"),
    };
    vec![
        row["name"].clone(),
        vcpus,
        format!("{memory}"),
        gpus,
        match row["temp_disk_gib"].as_str() {
            "" => "?".to_owned(),
            "0" => "-".to_owned(),
            gib => gib.to_owned(),
        },
        // InfiniBand: yes, or `-` (no, or not stated: the catalog reads both as none).
        if row["rdma"] == "true" { "yes" } else { "-" }.to_owned(),
        yes_no(&row["accelerated_networking"], "?"),
        row["generations"].replace(' ', ","),
        row["quota_family"].clone(),
        money(payg),
        spot.map_or_else(|| "-".to_owned(), money),
        retirement,
    ]
}

#[test]
fn the_table_of_a_small_filter_is_exactly_the_csv_s_rows_and_dates() {
    let catalog = Catalog::read();
    let keep = |r: &Row| gpus(r) >= 4.0;
    let offered = catalog.offered("eastus", keep);
    assert!(
        (2..=20).contains(&offered.len()),
        "a small table: {}",
        offered.len()
    );
    let hidden = catalog
        .sizes
        .rows
        .iter()
        .filter(|r| keep(r) && retired(r) && catalog.price(&r["name"], "eastus").is_some())
        .count();
    // Columns: left-aligned text, right-aligned numbers, two spaces apart, lines trimmed.
    let right = [
        false, true, true, false, true, false, false, false, false, true, true, false,
    ];
    let mut table: Vec<Vec<String>> = vec![
        [
            "SIZE",
            "VCPUS",
            "MEM GiB",
            "GPUS",
            "TEMP GiB",
            "IB",
            "ACCEL NET",
            "GEN",
            "QUOTA FAMILY",
            "$/H",
            "SPOT $/H",
            "RETIREMENT",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    table.extend(offered.iter().map(|(row, price)| cells(row, *price)));
    let widths: Vec<usize> = (0..right.len())
        .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut expected = String::new();
    for row in &table {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(right)
            .map(|((cell, width), right)| {
                if right {
                    format!("{cell:>width$}")
                } else {
                    format!("{cell:<width$}")
                }
            })
            .collect();
        expected.push_str(line.join("  ").trim_end());
        expected.push('\n');
    }
    let _ = write!(
        expected,
        "\n{} sizes offered in eastus; catalog of {}; prices: Linux pay-as-you-go, USD, Azure's \
         price list of {}.\n",
        offered.len(),
        catalog.sizes.comments["generated"],
        catalog.prices_file.comments["prices-date"],
    );
    if hidden > 0 {
        let _ = writeln!(
            expected,
            "{hidden} retired size{} not shown (--include-retired lists {}).",
            if hidden == 1 { " is" } else { "s are" },
            if hidden == 1 { "it" } else { "them" }
        );
    }
    dsinfra()
        .args(["sizes", "--region", "eastus", "--min-gpus", "4"])
        .assert()
        .success()
        .stdout(expected);
}

#[test]
fn help_teaches_with_examples() {
    let output = dsinfra()
        .args(["sizes", "--help"])
        .output()
        .expect("dsinfra runs");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    for example in [
        "dsinfra sizes --gpu --region eastus",
        "--max-price",
        "--include-retired",
        "docs/sizes.md",
    ] {
        assert!(help.contains(example), "{example} in:\n{help}");
    }
}
