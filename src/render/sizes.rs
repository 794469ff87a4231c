//! `dsinfra sizes`: the VM sizes a user can choose from, with their facts and, in a region, their
//! price, as an aligned table or as JSON.
//!
//! The table shows what decides a choice (vCPUs, memory, GPUs, temp disk, InfiniBand, accelerated
//! networking, Hyper-V generations, the quota family to ask for, the price, retirement) and says
//! plainly what the catalog does not know (`?`) rather than guessing. Its footer names the
//! catalog's date and the price list's, so a price is never read without its date. JSON carries
//! every fact, an unknown one as `null`.

use std::fmt::Write as _;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::money::rate;
use super::paint::{bold, paint, red, yellow};
use super::table::{Align, aligned};
use crate::catalog::query::SizeRow;
use crate::catalog::{GpuArch, Retirement, VmSize};

/// What `dsinfra sizes` found, and what the footer says about it.
#[derive(Debug, Clone)]
pub struct SizesView<'a> {
    /// The sizes, in the order to show them.
    pub rows: &'a [SizeRow],
    /// The region whose prices the rows carry, if one was asked for.
    pub region: Option<&'a str>,
    /// The day retirement dates are compared with.
    pub today: NaiveDate,
    /// When the size catalog was generated.
    pub catalog_date: Option<NaiveDate>,
    /// When the prices were read from Azure's price list.
    pub prices_date: Option<NaiveDate>,
    /// How many sizes matched but were left out because they are retired.
    pub hidden_retired: usize,
}

/// The listing as an aligned table with a footer; `colour` paints the header and retirements.
pub fn sizes_text(view: &SizesView<'_>, colour: bool) -> String {
    let mut out = String::new();
    if view.rows.is_empty() {
        out.push_str("No size matches.\n");
    } else {
        let mut header = vec![
            "SIZE",
            "VCPUS",
            "MEM GiB",
            "GPUS",
            "TEMP GiB",
            "IB",
            "ACCEL NET",
            "GEN",
            "QUOTA FAMILY",
        ];
        let mut align = vec![
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Left,
            Align::Left,
            Align::Left,
            Align::Left,
        ];
        if view.region.is_some() {
            header.extend(["$/H", "SPOT $/H"]);
            align.extend([Align::Right, Align::Right]);
        }
        header.push("RETIREMENT");
        let mut rows = vec![
            header
                .iter()
                .map(|h| paint(colour, &bold(), h))
                .collect::<Vec<_>>(),
        ];
        rows.extend(
            view.rows
                .iter()
                .map(|row| cells(row, view.region.is_some(), view.today, colour)),
        );
        out.push_str(&aligned(&rows, &align));
    }
    out.push('\n');
    out.push_str(&footer(view));
    out
}

/// One row's cells, in the header's order.
fn cells(row: &SizeRow, priced: bool, today: NaiveDate, colour: bool) -> Vec<String> {
    let size = row.size;
    let vcpus = if size.vcpus_available == size.vcpus {
        size.vcpus.to_string()
    } else {
        // Constrained-core sizes: the quota counts the first, the guest sees the second.
        format!("{} ({})", size.vcpus, size.vcpus_available)
    };
    let gpus = if size.gpus > 0.0 {
        format!("{} x {}", size.gpus_text(), size.gpu_model)
    } else {
        "-".to_owned()
    };
    let temp_disk = match size.temp_disk_gib {
        None => "?".to_owned(),
        Some(0) => "-".to_owned(),
        Some(gib) => gib.to_string(),
    };
    let accelerated_networking = match size.accelerated_networking {
        None => "?",
        Some(true) => "yes",
        Some(false) => "no",
    };
    let mut cells = vec![
        size.name.to_string(),
        vcpus,
        format!("{}", size.memory_gib),
        gpus,
        temp_disk,
        if size.infiniband { "yes" } else { "-" }.to_owned(),
        accelerated_networking.to_owned(),
        generations(size)
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(","),
        size.quota_family.to_string(),
    ];
    if priced {
        cells.push(
            row.price
                .map_or_else(|| "?".to_owned(), |p| rate(p.linux_payg)),
        );
        cells.push(
            row.price
                .and_then(|p| p.spot)
                .map_or_else(|| "-".to_owned(), rate),
        );
    }
    cells.push(match size.retirement(today) {
        Some(Retirement::Retired(date)) => paint(colour, &red(), &format!("retired {date}")),
        Some(Retirement::Retiring(date)) => paint(colour, &yellow(), &format!("retires {date}")),
        None => String::new(),
    });
    cells
}

/// The Hyper-V generations a size boots, as the catalog writes them.
fn generations(size: &VmSize) -> Vec<u8> {
    let mut gens = Vec::new();
    if size.gen1 {
        gens.push(1);
    }
    if size.gen2 {
        gens.push(2);
    }
    gens
}

/// How many sizes, where, and the dates of the facts and prices shown.
fn footer(view: &SizesView<'_>) -> String {
    let date =
        |d: Option<NaiveDate>| d.map_or_else(|| "an unknown date".to_owned(), |d| d.to_string());
    let count = match view.rows.len() {
        1 => "1 size".to_owned(),
        n => format!("{n} sizes"),
    };
    let mut out = match view.region {
        Some(region) => format!("{count} offered in {region}"),
        None => count,
    };
    let _ = write!(
        out,
        "; catalog of {}; prices: Linux pay-as-you-go, USD, Azure's price list of {}",
        date(view.catalog_date),
        date(view.prices_date)
    );
    out.push_str(if view.region.is_some() {
        ".\n"
    } else {
        " (add --region R to see them).\n"
    });
    match view.hidden_retired {
        0 => {}
        1 => out.push_str("1 retired size is not shown (--include-retired lists it).\n"),
        n => {
            let _ = writeln!(
                out,
                "{n} retired sizes are not shown (--include-retired lists them)."
            );
        }
    }
    out
}

/// The listing as a JSON array: every fact of every size (an unknown one is `null`), with the
/// region's `price` and `spot` when a region was asked for, else the `regions` that offer it.
///
/// # Panics
///
/// Never: an array of JSON objects always serialises.
pub fn sizes_json(view: &SizesView<'_>) -> String {
    let rows: Vec<Value> = view
        .rows
        .iter()
        .map(|row| size_json(row, view.region, view.today))
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Array(rows))
        .expect("an array of JSON objects always serialises");
    text.push('\n');
    text
}

fn size_json(row: &SizeRow, region: Option<&str>, today: NaiveDate) -> Value {
    let size = row.size;
    let text_or_null = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    let mut object = json!({
        "name": size.name,
        "vcpus": size.vcpus,
        "vcpus_available": size.vcpus_available,
        "memory_gib": size.memory_gib,
        "gpus": size.gpus,
        "gpu_model": text_or_null(&size.gpu_model),
        "gpu_arch": size.gpu_arch.map(arch_name),
        "temp_disk_gib": size.temp_disk_gib,
        "quota_family": size.quota_family,
        "generations": generations(size),
        "infiniband": size.infiniband,
        "accelerated_networking": size.accelerated_networking,
        "premium_io": size.premium_io,
        "retirement_date": size.retirement_date.map(|d| d.to_string()),
        "retired": matches!(size.retirement(today), Some(Retirement::Retired(_))),
        "facts": size.facts,
    });
    if let Some(map) = object.as_object_mut() {
        match region {
            Some(region) => {
                map.insert("region".into(), json!(region));
                map.insert("price".into(), json!(row.price.map(|p| p.linux_payg)));
                map.insert("spot".into(), json!(row.price.and_then(|p| p.spot)));
            }
            None => {
                map.insert("regions".into(), json!(row.regions));
            }
        }
    }
    object
}

/// The architecture as the catalog file names it.
fn arch_name(arch: GpuArch) -> &'static str {
    match arch {
        GpuArch::Kepler => "Kepler",
        GpuArch::Maxwell => "Maxwell",
        GpuArch::Pascal => "Pascal",
        GpuArch::Volta => "Volta",
        GpuArch::Turing => "Turing",
        GpuArch::Ampere => "Ampere",
        GpuArch::Ada => "Ada",
        GpuArch::Hopper => "Hopper",
        GpuArch::Blackwell => "Blackwell",
        GpuArch::Amd => "AMD",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    use crate::catalog::Price;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
    }

    /// Sizes with every kind of cell: unknowns, none, fractions, constrained cores, retirements.
    fn sizes() -> Vec<&'static VmSize> {
        let base = VmSize {
            name: Cow::Borrowed("Standard_D8ds_v5"),
            vcpus: 8,
            vcpus_available: 8,
            memory_gib: 32.0,
            gpus: 0.0,
            gpu_model: Cow::Borrowed(""),
            gpu_arch: None,
            temp_disk_gib: Some(300),
            quota_family: Cow::Borrowed("standardDDSv5Family"),
            gen1: true,
            gen2: true,
            infiniband: false,
            accelerated_networking: Some(true),
            premium_io: Some(true),
            cpu: crate::catalog::CpuArchitecture::X64,
            trusted_launch: Some(true),
            temp_nvme: false,
            nvme_gib: None,
            retirement_date: None,
            facts: Cow::Borrowed("skus;docs:ddsv5-series"),
        };
        let rows = vec![
            base.clone(),
            VmSize {
                name: Cow::Borrowed("Standard_NV6ads_A10_v5"),
                vcpus: 6,
                vcpus_available: 6,
                memory_gib: 55.0,
                gpus: 1.0 / 6.0,
                gpu_model: Cow::Borrowed("A10"),
                gpu_arch: Some(GpuArch::Ampere),
                temp_disk_gib: None,
                quota_family: Cow::Borrowed("StandardNVADSA10v5Family"),
                gen2: true,
                accelerated_networking: None,
                premium_io: None,
                retirement_date: Some(day("2027-03-31")),
                facts: Cow::Borrowed("skus"),
                ..base.clone()
            },
            VmSize {
                name: Cow::Borrowed("Standard_HB176-144rs_v4"),
                vcpus: 176,
                vcpus_available: 144,
                memory_gib: 768.0,
                temp_disk_gib: Some(0),
                quota_family: Cow::Borrowed("standardHBrsv4Family"),
                gen1: false,
                infiniband: true,
                accelerated_networking: Some(false),
                retirement_date: Some(day("2025-09-30")),
                ..base
            },
        ];
        rows.into_iter().map(|s| &*Box::leak(Box::new(s))).collect()
    }

    fn view(rows: &[SizeRow], region: Option<&'static str>) -> SizesView<'static> {
        SizesView {
            rows: Box::leak(rows.to_vec().into_boxed_slice()),
            region,
            today: day("2026-11-26"),
            catalog_date: Some(day("2026-11-26")),
            prices_date: Some(day("2026-05-20")),
            hidden_retired: 0,
        }
    }

    fn priced() -> Vec<SizeRow> {
        let prices = [(0.452, Some(0.1001)), (0.454, None), (7.2, Some(1.44))];
        sizes()
            .into_iter()
            .zip(prices)
            .map(|(size, (linux_payg, spot))| SizeRow {
                size,
                price: Some(Price { linux_payg, spot }),
                regions: vec!["eastus"],
            })
            .collect()
    }

    #[test]
    fn a_region_s_table_shows_prices_unknowns_and_retirements_with_its_dates() {
        let text = sizes_text(&view(&priced(), Some("eastus")), false);
        assert_eq!(
            text,
            "\
SIZE                         VCPUS  MEM GiB  GPUS         TEMP GiB  IB   ACCEL NET  GEN  QUOTA FAMILY                  $/H  SPOT $/H  RETIREMENT
Standard_D8ds_v5                 8       32  -                 300  -    yes        1,2  standardDDSv5Family       $0.4520   $0.1001
Standard_NV6ads_A10_v5           6       55  0.167 x A10         ?  -    ?          1,2  StandardNVADSA10v5Family  $0.4540         -  retires 2027-03-31
Standard_HB176-144rs_v4  176 (144)      768  -                   -  yes  no         2    standardHBrsv4Family        $7.20     $1.44  retired 2025-09-30

3 sizes offered in eastus; catalog of 2026-11-26; prices: Linux pay-as-you-go, USD, Azure's price list of 2026-05-20.
"
        );
    }

    #[test]
    fn without_a_region_there_are_no_price_columns_and_the_footer_says_how_to_get_them() {
        let rows: Vec<SizeRow> = priced()
            .into_iter()
            .take(1)
            .map(|r| SizeRow { price: None, ..r })
            .collect();
        let mut view = view(&rows, None);
        view.hidden_retired = 2;
        assert_eq!(
            sizes_text(&view, false),
            "\
SIZE              VCPUS  MEM GiB  GPUS  TEMP GiB  IB  ACCEL NET  GEN  QUOTA FAMILY         RETIREMENT
Standard_D8ds_v5      8       32  -          300  -   yes        1,2  standardDDSv5Family

1 size; catalog of 2026-11-26; prices: Linux pay-as-you-go, USD, Azure's price list of 2026-05-20 (add --region R to see them).
2 retired sizes are not shown (--include-retired lists them).
"
        );
    }

    #[test]
    fn nothing_found_says_so_with_the_footer() {
        let text = sizes_text(&view(&[], Some("eastus")), false);
        assert!(
            text.starts_with("No size matches.\n\n0 sizes offered in eastus;"),
            "{text}"
        );
    }

    #[test]
    fn colour_paints_the_header_and_retirements_only_when_asked() {
        let coloured = sizes_text(&view(&priced(), Some("eastus")), true);
        assert!(
            coloured.contains("\u{1b}[31mretired 2025-09-30\u{1b}[0m"),
            "{coloured}"
        );
        assert!(
            coloured.contains("\u{1b}[33mretires 2027-03-31\u{1b}[0m"),
            "{coloured}"
        );
        let plain = sizes_text(&view(&priced(), Some("eastus")), false);
        assert!(!plain.contains('\u{1b}'));
        // Styles do not shift the columns.
        assert_eq!(console::strip_ansi_codes(&coloured), plain);
    }

    #[test]
    fn json_has_every_fact_with_null_for_unknowns_and_the_region_s_price() {
        let rows = priced();
        let parsed: Value =
            serde_json::from_str(&sizes_json(&view(&rows, Some("eastus")))).expect("JSON");
        let nv = &parsed[1];
        assert_eq!(nv["name"], "Standard_NV6ads_A10_v5");
        assert_eq!(nv["gpu_model"], "A10");
        assert_eq!(nv["gpu_arch"], "Ampere");
        assert_eq!(nv["temp_disk_gib"], Value::Null);
        assert_eq!(nv["accelerated_networking"], Value::Null);
        assert_eq!(nv["premium_io"], Value::Null);
        assert_eq!(nv["generations"], json!([1, 2]));
        assert_eq!(nv["retirement_date"], "2027-03-31");
        assert_eq!(nv["retired"], false);
        assert_eq!(
            (nv["region"].clone(), nv["price"].clone()),
            (json!("eastus"), json!(0.454))
        );
        assert_eq!(nv["spot"], Value::Null);
        assert!(nv.get("regions").is_none());
        let hb = &parsed[2];
        assert_eq!(
            (hb["vcpus"].clone(), hb["vcpus_available"].clone()),
            (json!(176), json!(144))
        );
        assert_eq!(
            (hb["temp_disk_gib"].clone(), hb["retired"].clone()),
            (json!(0), json!(true))
        );
        assert_eq!(hb["gpu_model"], Value::Null);
    }

    #[test]
    fn json_without_a_region_lists_the_regions_instead_of_a_price() {
        let rows: Vec<SizeRow> = priced()
            .into_iter()
            .map(|r| SizeRow {
                price: None,
                regions: vec!["eastus", "westeurope"],
                ..r
            })
            .collect();
        let parsed: Value = serde_json::from_str(&sizes_json(&view(&rows, None))).expect("JSON");
        assert_eq!(parsed[0]["regions"], json!(["eastus", "westeurope"]));
        assert!(parsed[0].get("price").is_none() && parsed[0].get("region").is_none());
    }
}
