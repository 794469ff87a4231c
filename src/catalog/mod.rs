//! What dsinfra knows about Azure without asking it: VM sizes, their facts and their prices per
//! region, and the regions.
//!
//! The plan needs vCPUs (quota), GPUs, temp-disk size (BeeOND, blobfuse caches), the quota family,
//! the Hyper-V generations a size boots, whether it has InfiniBand, and an hourly price in the
//! manifest's region, all offline. These are facts Azure publishes (Resource SKUs, the Retail Prices
//! API, the size documentation), so they are not typed here: `scripts/catalog/generate.py`
//! writes them to `data/catalog/vm-sizes.csv` and `vm-prices.csv`, which are embedded in the
//! binary and parsed once, on first use ([`table`]). docs/catalog.md says where each fact comes
//! from, its date, and how to refresh the files. A fact the sources did not state is `None`, never
//! a guess; the preflight fills it from the subscription's live Resource SKUs when connected.

pub mod images;
mod locations;
pub mod query;
mod table;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use chrono::NaiveDate;

pub use locations::{LOCATIONS, is_known_location};
pub use table::{Provenance, TableError};

/// Hours in the 30-day projection the plan shows.
pub const HOURS_PER_MONTH: f64 = 720.0;

/// One VM size, as the shipped catalog states it.
// Each flag is an independent fact Resource SKUs states (generations, RDMA, NVMe temp storage),
// not a state machine an enum would name better.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VmSize {
    /// ARM size name, e.g. `Standard_ND40rs_v2`. Borrowed from the embedded table for shipped
    /// sizes, owned for sizes learnt from live Resource SKUs (and read back from a saved plan).
    pub name: Cow<'static, str>,
    /// vCPUs: what the quota counts.
    pub vcpus: u32,
    /// vCPUs the guest sees: fewer than `vcpus` on constrained-core sizes (`HB176-144rs_v4`).
    pub vcpus_available: u32,
    /// Memory in GiB.
    pub memory_gib: f64,
    /// Number of GPUs; a fraction for sizes that get part of one (`NV6ads_A10_v5`: 1/6).
    pub gpus: f64,
    /// GPU model (`V100`, `H100`), empty for CPU sizes.
    pub gpu_model: Cow<'static, str>,
    /// The GPU's architecture, `None` for CPU sizes: it decides which driver (and so which HPC
    /// image) can run the GPU.
    pub gpu_arch: Option<GpuArch>,
    /// Local temp disk in GiB: `Some(0)` when the size has none, `None` when the shipped sources
    /// do not say.
    pub temp_disk_gib: Option<u32>,
    /// The quota family ARM's usages API reports (`standardNDSv2Family`).
    pub quota_family: Cow<'static, str>,
    /// Boots Generation 1 images.
    pub gen1: bool,
    /// Boots Generation 2 images.
    pub gen2: bool,
    /// Has an InfiniBand (RDMA) interface.
    pub infiniband: bool,
    /// Supports accelerated networking on its NIC; `None` when the sources do not say.
    pub accelerated_networking: Option<bool>,
    /// Can attach Premium SSD disks; `None` when the sources do not say.
    pub premium_io: Option<bool>,
    /// Its processor's architecture (Resource SKUs `CpuArchitectureType`): the images it boots.
    pub cpu: CpuArchitecture,
    /// Whether ARM accepts `securityType: TrustedLaunch` for it: `Some(false)` where Resource
    /// SKUs say `TrustedLaunchDisabled` (or the size boots Generation 1 only), `None` where the
    /// shipped sources do not say.
    pub trusted_launch: Option<bool>,
    /// Its local storage is raw NVMe disks, not a mounted temp (resource) disk: the v6 and newer
    /// `d` sizes. Nothing is mounted at boot; a step that needs local scratch assembles them.
    pub temp_nvme: bool,
    /// Local NVMe capacity in GiB (all disks), `None` when not known or none.
    pub nvme_gib: Option<u32>,
    /// When Azure retired or retires the size, if it announced that.
    pub retirement_date: Option<NaiveDate>,
    /// Where the row's facts came from (`skus;docs:ddsv5-series`), for `dsinfra sizes --json`.
    pub facts: Cow<'static, str>,
}

/// Whether a size name marks an Arm64 processor. Azure's size naming convention puts the
/// additive feature letters, lower case, after the vCPU count (`Standard_D4ps_v5`: `p`, `s`), and
/// `p` is "Arm-based processor" there; every catalog size with it is an Ampere Altra or Cobalt
/// size (B*ps/pls/pts_v2, D*p*_v5/v6, E*p*_v5/v6), and no x64 size has it. Resource SKUs says the
/// same as `CpuArchitectureType: Arm64`; the catalog's `cpu_architecture` column, which this rule
/// fills where no source states it, is what callers read ([`VmSize::arm64`]).
pub fn is_arm64_name(name: &str) -> bool {
    let rest = name.strip_prefix("Standard_").unwrap_or(name);
    let series = rest.split('_').next().unwrap_or_default();
    // Family letters (upper case), then the vCPU count (and a constrained count after `-`),
    // then the feature letters.
    let features = series
        .trim_start_matches(|c: char| c.is_ascii_uppercase())
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '-');
    features.chars().all(|c| c.is_ascii_lowercase()) && features.contains('p')
}

/// A processor architecture, as Resource SKUs' `CpuArchitectureType` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CpuArchitecture {
    /// x86-64.
    X64,
    /// 64-bit Arm (Ampere Altra, Cobalt).
    Arm64,
}

impl CpuArchitecture {
    /// From Resource SKUs' (and the catalog's) spelling: `x64`, `Arm64`, any case.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "x64" => Some(Self::X64),
            "arm64" => Some(Self::Arm64),
            _ => None,
        }
    }

    /// The size name's own statement when no source gave one ([`is_arm64_name`]).
    pub fn of_name(name: &str) -> Self {
        if is_arm64_name(name) {
            Self::Arm64
        } else {
            Self::X64
        }
    }
}

/// Where a size stands on a given day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retirement {
    /// Retired on that date: Azure no longer creates it.
    Retired(NaiveDate),
    /// Announced to retire on that date.
    Retiring(NaiveDate),
}

impl VmSize {
    /// Accepts only Generation 2 images.
    pub fn gen2_only(&self) -> bool {
        self.gen2 && !self.gen1
    }

    /// Accepts only Generation 1 images.
    pub fn gen1_only(&self) -> bool {
        self.gen1 && !self.gen2
    }

    /// Has an Arm64 processor, and so boots Arm64 images only.
    pub fn arm64(&self) -> bool {
        self.cpu == CpuArchitecture::Arm64
    }

    /// Has local NVMe disks and no temp disk: `{temp}` needs them assembled first.
    pub fn nvme_only(&self) -> bool {
        self.temp_nvme && self.temp_disk_gib.unwrap_or(0) == 0
    }

    /// Whether the size is retired or retiring as of `today`.
    pub fn retirement(&self, today: NaiveDate) -> Option<Retirement> {
        self.retirement_date.map(|date| {
            if date <= today {
                Retirement::Retired(date)
            } else {
                Retirement::Retiring(date)
            }
        })
    }

    /// The GPU count as people write it: `8`, or `0.167` for part of one.
    pub fn gpus_text(&self) -> String {
        if self.gpus.fract() == 0.0 {
            format!("{}", self.gpus)
        } else {
            format!("{:.3}", self.gpus)
        }
    }

    /// Whether the facts come from a subscription's live Resource SKUs ([`learn`]), not from the
    /// shipped catalog.
    pub fn is_live(&self) -> bool {
        self.facts.starts_with(LIVE_FACTS)
    }
}

/// Today, in UTC: what retirement dates are compared with.
pub fn today() -> NaiveDate {
    chrono::Utc::now().date_naive()
}

/// GPU architectures, NVIDIA's oldest first, then AMD's.
///
/// The architecture decides the driver: NVIDIA's open kernel modules, which the current HPC
/// images ship, run Turing and newer only; Volta (V100) needs the proprietary modules, which
/// Azure's HPC images publish as a separate `-v100` SKU.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum GpuArch {
    /// K80 (NC, NCv2: retired).
    Kepler,
    /// M60 (NVv3).
    Maxwell,
    /// P40, P100 (ND, NCv2: retired).
    Pascal,
    /// V100 (NCv3, NDv2).
    Volta,
    /// T4 (NCasT4_v3).
    Turing,
    /// A100, A10 (NC A100 v4, ND A100 v4, NVadsA10 v5).
    Ampere,
    /// L4, L40S.
    Ada,
    /// H100, H200 (NC H100 v5, ND H100 v5, ND H200 v5).
    Hopper,
    /// GB200, GB300.
    Blackwell,
    /// AMD Instinct and Radeon (MI25, MI300X, V620, V710): not NVIDIA's drivers at all.
    Amd,
}

impl GpuArch {
    /// The architecture the catalog file names.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "Kepler" => Self::Kepler,
            "Maxwell" => Self::Maxwell,
            "Pascal" => Self::Pascal,
            "Volta" => Self::Volta,
            "Turing" => Self::Turing,
            "Ampere" => Self::Ampere,
            "Ada" => Self::Ada,
            "Hopper" => Self::Hopper,
            "Blackwell" => Self::Blackwell,
            "AMD" => Self::Amd,
            _ => return None,
        })
    }

    /// Whether NVIDIA makes it (its driver is NVIDIA's).
    pub fn is_nvidia(self) -> bool {
        self != Self::Amd
    }

    /// Whether this is an NVIDIA GPU that NVIDIA's open kernel modules cannot drive (older than
    /// Turing): it needs the proprietary modules.
    pub fn needs_proprietary_nvidia_driver(self) -> bool {
        self < Self::Turing
    }
}

/// A size's hourly price in one region, in USD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Pay-as-you-go, Linux.
    pub linux_payg: f64,
    /// Spot, Linux, where Azure publishes one.
    pub spot: Option<f64>,
}

/// The shipped catalog, parsed once.
struct Shipped {
    sizes: Vec<VmSize>,
    sizes_provenance: Provenance,
    /// Lower-case name to index in `sizes`.
    by_name: HashMap<String, usize>,
}

/// The shipped prices: their provenance, read on first use, and the file's data lines, sorted
/// by size index then region, where each lookup reads its size's rows in place
/// ([`table::price_lines`]).
struct Prices {
    provenance: Provenance,
    body: &'static str,
}

static SIZES_CSV: &str = include_str!("../../data/catalog/vm-sizes.csv");
static PRICES_CSV: &str = include_str!("../../data/catalog/vm-prices.csv");

static CATALOG: LazyLock<Shipped> = LazyLock::new(|| {
    // The file is part of the binary; a unit test parses it, so this cannot fail in a build
    // that passed CI.
    let (sizes_provenance, sizes) = table::parse_sizes(SIZES_CSV)
        .unwrap_or_else(|e| panic!("the embedded VM size catalog is malformed: {e}"));
    let by_name = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.to_ascii_lowercase(), i))
        .collect();
    Shipped {
        sizes,
        sizes_provenance,
        by_name,
    }
});

static PRICES: LazyLock<Prices> = LazyLock::new(|| {
    // A unit test parses the whole file (and holds every lookup to it), so this cannot fail in
    // a build that passed CI.
    let top = table::preamble("vm-prices.csv", PRICES_CSV, table::PRICES_HEADER)
        .unwrap_or_else(|e| panic!("the embedded VM price catalog is malformed: {e}"));
    Prices {
        provenance: top.provenance,
        body: &PRICES_CSV[top.body..],
    }
});

/// The `facts` of a size learnt from live Resource SKUs.
pub const LIVE_FACTS: &str = "live:skus";

/// What a command knows about VM sizes: the shipped table, and over it the sizes learnt from the
/// subscription's live Resource SKUs (sizes Azure added after the table was generated, or facts
/// its row leaves unknown), consulted first, as hcl-rs chains an evaluation context on its
/// parent. A value: the connected command that learns sizes passes it to the manifest's loader,
/// the loaded manifest carries it ([`crate::model::Desired::catalog`]), and a saved plan records
/// the learnt sizes so that `show` and `apply PLANFILE` judge against the same facts. Cheap to
/// clone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    learned: std::sync::Arc<Vec<VmSize>>,
}

/// What [`Catalog::learn`] did with a live size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learnt {
    /// The shipped table lacks it: added as Resource SKUs state it.
    New,
    /// Shipped, with facts its row left unknown now filled from Resource SKUs.
    Filled,
    /// Shipped, and the live facts add nothing.
    Known,
}

impl Catalog {
    /// The shipped table alone.
    pub fn shipped() -> Self {
        Self::default()
    }

    /// The shipped table with `learned` over it (as [`Catalog::learned`] gave them).
    pub fn with_learned(learned: Vec<VmSize>) -> Self {
        Self {
            learned: std::sync::Arc::new(learned),
        }
    }

    /// The sizes learnt, in the order learnt: what a saved plan records.
    pub fn learned(&self) -> &[VmSize] {
        &self.learned
    }

    /// Look a size up by its ARM name (case-insensitive, as ARM is): a learnt size first (it
    /// only adds to the shipped facts), then the shipped table.
    pub fn vm_size(&self, name: &str) -> Option<&VmSize> {
        self.learned
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
            .or_else(|| shipped_size(name))
    }

    /// Every size name known, shipped and learnt, for "did you mean" suggestions.
    pub fn vm_size_names(&self) -> impl Iterator<Item = &str> {
        self.learned
            .iter()
            .map(|s| &*s.name)
            .chain(vm_sizes().iter().map(|s| &*s.name))
    }

    /// Add what live Resource SKUs say of a size (its `facts` should start with
    /// [`LIVE_FACTS`]). A size the shipped table lacks is added as it is; for a shipped size,
    /// the live facts fill only what the shipped row leaves unknown (temp disk, accelerated
    /// networking, premium IO, retirement, Trusted Launch, NVMe), so a shipped fact is never
    /// replaced.
    pub fn learn(&mut self, live: VmSize) -> Learnt {
        let (merged, learnt) = match shipped_size(&live.name) {
            Some(known) => {
                let filled = VmSize {
                    temp_disk_gib: known.temp_disk_gib.or(live.temp_disk_gib),
                    accelerated_networking: known
                        .accelerated_networking
                        .or(live.accelerated_networking),
                    premium_io: known.premium_io.or(live.premium_io),
                    retirement_date: known.retirement_date.or(live.retirement_date),
                    trusted_launch: known.trusted_launch.or(live.trusted_launch),
                    nvme_gib: known.nvme_gib.or(live.nvme_gib),
                    ..known.clone()
                };
                if filled == *known {
                    return Learnt::Known;
                }
                let filled = VmSize {
                    facts: Cow::Borrowed(LIVE_FILLED_FACTS),
                    ..filled
                };
                (filled, Learnt::Filled)
            }
            None => (live, Learnt::New),
        };
        let learned = std::sync::Arc::make_mut(&mut self.learned);
        learned.retain(|s| !s.name.eq_ignore_ascii_case(&merged.name));
        learned.push(merged);
        learnt
    }
}

/// The `facts` of a shipped size whose unknown facts live Resource SKUs filled.
pub const LIVE_FILLED_FACTS: &str = "shipped+live:skus";

/// The shipped row of a size (case-insensitive). What a command without a [`Catalog`] knows:
/// the catalog's own helpers, `dsinfra sizes`, the built-in emulator's size table.
pub fn shipped_size(name: &str) -> Option<&'static VmSize> {
    let catalog = &*CATALOG;
    catalog
        .by_name
        .get(&name.to_ascii_lowercase())
        .map(|&i| &catalog.sizes[i])
}

/// Every size the catalog knows, sorted by name.
pub fn vm_sizes() -> &'static [VmSize] {
    &CATALOG.sizes
}

/// Where the size facts come from and when they were generated.
pub fn sizes_provenance() -> &'static Provenance {
    &CATALOG.sizes_provenance
}

/// Where the prices come from and when they were read.
pub fn prices_provenance() -> &'static Provenance {
    &PRICES.provenance
}

/// The date the shipped prices were read from their source (what a plan shows next to a cost).
pub fn prices_date() -> Option<NaiveDate> {
    let provenance = prices_provenance();
    provenance.prices_date.or(provenance.generated)
}

/// The index of a shipped size in the size table.
fn size_index(name: &str) -> Option<usize> {
    CATALOG.by_name.get(&name.to_ascii_lowercase()).copied()
}

/// The rows of one size in the price table.
fn price_rows(size: &str) -> Vec<table::PriceRow> {
    let Some(index) = size_index(size) else {
        return Vec::new();
    };
    table::price_lines(PRICES.body, index, size_index)
}

/// A size's price in a region (case-insensitive, spaces ignored as ARM does); `None` when Azure
/// does not offer the size there, or the catalog does not know the size.
pub fn price(size: &str, region: &str) -> Option<Price> {
    let region = normal_region(region);
    price_rows(size)
        .iter()
        .find(|(_, r, _)| *r == region)
        .map(|(_, _, p)| *p)
}

/// The regions that offer a size, sorted.
pub fn regions_offering(size: &str) -> Vec<&'static str> {
    price_rows(size).iter().map(|(_, r, _)| *r).collect()
}

/// `East US` -> `eastus`: ARM's own normalisation of a location name.
pub fn normal_region(region: &str) -> String {
    region
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The size that is `size` plus a local temp disk (`Standard_D4s_v5` -> `Standard_D4ds_v5`), if
/// the catalog knows one. Azure marks a temp disk with a `d` among the lower-case feature letters
/// after the vCPU count, and their order varies between series (`D4ads_v5`, `D4plds_v5`), so
/// the sibling is found by dropping that `d` from each known size with a temp disk rather than
/// by inserting it at a guessed position.
pub fn with_temp_disk(size: &VmSize) -> Option<&'static VmSize> {
    vm_sizes().iter().find(|s| {
        s.temp_disk_gib.is_some_and(|gib| gib > 0)
            && s.vcpus == size.vcpus
            && without_disk_letter(&s.name).is_some_and(|n| n.eq_ignore_ascii_case(&size.name))
    })
}

/// For a size whose local storage is NVMe only (the v6 and newer `d` sizes), the v5 size of the
/// same name, which has a temp disk mounted at boot (`Standard_D8ds_v6` -> `Standard_D8ds_v5`).
pub fn with_scsi_temp_disk(size: &VmSize) -> Option<&'static VmSize> {
    let (stem, version) = size.name.rsplit_once("_v")?;
    if !matches!(version, "6" | "7") {
        return None;
    }
    shipped_size(&format!("{stem}_v5")).filter(|s| {
        s.temp_disk_gib.is_some_and(|gib| gib > 0) && !s.temp_nvme && s.vcpus == size.vcpus
    })
}

/// The size that is `size` with premium storage (`Standard_D4_v5` -> `Standard_D4s_v5`,
/// `Standard_D3_v2` -> `Standard_DS3_v2`), if the catalog knows one: Azure marks premium IO with
/// an `s` after the other feature letters, or, in the older series, an `S` after the family letter.
pub fn with_premium_io(size: &VmSize) -> Option<&'static VmSize> {
    let rest = size.name.strip_prefix("Standard_")?;
    let (first, suffix) = rest.split_once('_').map_or((rest, ""), |(a, b)| (a, b));
    let suffix = if suffix.is_empty() {
        String::new()
    } else {
        format!("_{suffix}")
    };
    let family_end = first.find(|c: char| !c.is_ascii_uppercase())?;
    [
        format!("Standard_{first}s{suffix}"),
        format!(
            "Standard_{}S{}{suffix}",
            &first[..family_end],
            &first[family_end..]
        ),
    ]
    .iter()
    .filter_map(|candidate| shipped_size(candidate))
    .find(|s| s.premium_io == Some(true) && s.vcpus == size.vcpus)
}

/// `Standard_D4ds_v5` -> `Standard_D4s_v5`: the name without the `d` feature letter, if it has one.
fn without_disk_letter(name: &str) -> Option<String> {
    let rest = name.strip_prefix("Standard_")?;
    let first = rest.split('_').next()?;
    // Family letters (upper case), the vCPU count, then the feature letters (lower case).
    let digits_end = first
        .char_indices()
        .skip_while(|(_, c)| c.is_ascii_uppercase())
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(first.len(), |(i, _)| i);
    let features = &first[digits_end..];
    let at = features.find('d')?;
    let stem = format!(
        "{}{}{}",
        &first[..digits_end],
        &features[..at],
        &features[at + 1..]
    );
    Some(format!("Standard_{stem}{}", &rest[first.len()..]))
}

/// Indicative $/hour of a Standard static public IP.
pub const PUBLIC_IP_PER_HOUR: f64 = 0.005;

/// Indicative $/GiB-month of a managed disk by SKU (billed whether the VM runs or is parked).
pub fn disk_price_per_gib_month(sku: &str) -> f64 {
    match sku {
        "Premium_LRS" | "Premium_ZRS" => 0.154,
        "PremiumV2_LRS" => 0.082,
        "StandardSSD_LRS" | "StandardSSD_ZRS" => 0.075,
        "UltraSSD_LRS" => 0.12,
        _ => 0.045,
    }
}

/// $/hour of a managed disk of `size_gib` GiB.
pub fn disk_price_per_hour(sku: &str, size_gib: u32) -> f64 {
    disk_price_per_gib_month(sku) * f64::from(size_gib) / 730.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_launch_support_and_nvme_come_from_the_shipped_rows() {
        let size = |name| shipped_size(name).expect(name);
        // Issue 29: NDasrA100_v4 and NDm_A100_v4 refuse Trusted Launch; NDv2 and T4 accept it.
        assert_eq!(size("Standard_ND96asr_v4").trusted_launch, Some(false));
        assert_eq!(
            size("Standard_ND96amsr_A100_v4").trusted_launch,
            Some(false)
        );
        assert_eq!(size("Standard_ND40rs_v2").trusted_launch, Some(true));
        assert_eq!(size("Standard_NC4as_T4_v3").trusted_launch, Some(true));
        assert_eq!(size("Standard_D4ps_v5").trusted_launch, Some(false));
        // Generation 1 only: never.
        assert_eq!(size("Standard_A1_v2").trusted_launch, Some(false));
        // A v6 `d` size: its 440 GiB are one NVMe disk, not a temp disk.
        let v6 = size("Standard_D8ds_v6");
        assert!(v6.nvme_only());
        assert_eq!((v6.temp_disk_gib, v6.nvme_gib), (Some(0), Some(440)));
        assert!(!size("Standard_D8ds_v5").nvme_only());
        assert!(!size("Standard_ND40rs_v2").nvme_only());
        for size in vm_sizes() {
            if size.gen1_only() {
                assert_eq!(size.trusted_launch, Some(false), "{}", size.name);
            }
            assert!(!size.nvme_only() || size.temp_nvme, "{}", size.name);
        }
    }

    #[test]
    fn arm64_sizes_are_the_ones_whose_feature_letters_have_p() {
        for arm in [
            "Standard_D4ps_v5",
            "Standard_D2pds_v6",
            "Standard_E4ps_v5",
            "Standard_B2pts_v2",
            "Standard_D16plds_v5",
        ] {
            assert!(is_arm64_name(arm), "{arm}");
        }
        for x64 in [
            "Standard_D4s_v5",
            "Standard_NP10s",
            "Standard_ND40rs_v2",
            "Standard_NC4as_T4_v3",
            "Standard_M416-208ms_v2",
            "Standard_HB176-144rs_v4",
            "Standard_D3_v2",
        ] {
            assert!(!is_arm64_name(x64), "{x64}");
        }
        // Every catalog size so marked is in an Arm family (see the doc), and the catalog's
        // architecture column says the same as the name.
        for size in vm_sizes() {
            assert_eq!(size.arm64(), is_arm64_name(&size.name), "{}", size.name);
            if size.arm64() {
                assert!(
                    ["B", "D", "E"]
                        .iter()
                        .any(|f| size.name["Standard_".len()..].starts_with(f)),
                    "{}",
                    size.name
                );
            }
        }
    }

    #[test]
    fn a_lookup_in_place_finds_exactly_the_rows_of_the_whole_parsed_table() {
        let (_, all) = table::parse_prices(PRICES_CSV, vm_sizes()).expect("the shipped prices");
        let mut found = Vec::new();
        for size in vm_sizes() {
            found.extend(price_rows(&size.name));
        }
        assert_eq!(found.len(), all.len());
        assert!(found == all, "a lookup differs from the parsed table");
        assert!(price_rows("Standard_Nothing_v9").is_empty());
    }

    #[test]
    fn the_shipped_files_parse_and_every_size_is_priced_somewhere() {
        assert!(vm_sizes().len() > 1000, "{} sizes", vm_sizes().len());
        assert!(sizes_provenance().generated.is_some());
        assert!(!sizes_provenance().sources.is_empty());
        assert!(prices_date().is_some());
        for size in vm_sizes() {
            assert!(!regions_offering(&size.name).is_empty(), "{}", size.name);
            assert!(size.gen1 || size.gen2, "{}", size.name);
            assert!(size.vcpus_available <= size.vcpus, "{}", size.name);
        }
    }

    #[test]
    fn every_gpu_size_names_its_model_and_only_gpu_sizes_do() {
        for size in vm_sizes() {
            assert_eq!(size.gpus > 0.0, !size.gpu_model.is_empty(), "{}", size.name);
            if size.gpu_arch.is_some() {
                assert!(size.gpus > 0.0, "{}", size.name);
            }
        }
    }

    #[test]
    fn sizes_are_found_case_insensitively_with_their_quota_family() {
        let nd = shipped_size("standard_nd40rs_v2").expect("ND40rs_v2 known");
        assert_eq!(
            (&*nd.name, nd.vcpus, nd.gpus),
            ("Standard_ND40rs_v2", 40, 8.0)
        );
        assert!(nd.quota_family.eq_ignore_ascii_case("standardNDSv2Family"));
        assert!(nd.gen2_only() && nd.infiniband);
        assert_eq!(nd.gpu_arch, Some(GpuArch::Volta));
        assert!(shipped_size("Standard_Nope_v9").is_none());
    }

    #[test]
    fn the_issues_sizes_have_their_documented_facts() {
        // Facts from Azure's size pages (docs/catalog.md lists them): vCPUs, GPUs, temp disk, IB.
        let facts = |name: &str| {
            let s = shipped_size(name).unwrap_or_else(|| panic!("{name} known"));
            (s.vcpus, s.gpus, s.temp_disk_gib, s.infiniband)
        };
        assert_eq!(facts("Standard_D8ds_v5"), (8, 0.0, Some(300), false));
        assert_eq!(facts("Standard_E16ds_v5"), (16, 0.0, Some(600), false));
        assert_eq!(
            facts("Standard_NC40ads_H100_v5"),
            (40, 1.0, Some(3576), false)
        );
        assert_eq!(
            facts("Standard_ND96isr_H200_v5"),
            (96, 8.0, Some(1024), true)
        );
        assert_eq!(facts("Standard_HB176rs_v4"), (176, 0.0, Some(480), true));
        assert_eq!(
            shipped_size("Standard_NC40ads_H100_v5").and_then(|s| s.gpu_arch),
            Some(GpuArch::Hopper)
        );
    }

    #[test]
    fn prices_are_per_region_and_a_region_without_the_size_has_none() {
        // From the source data (docs/catalog.md): D8s_v5 costs more in westeurope.
        let eastus = price("Standard_D8s_v5", "eastus").expect("offered in eastus");
        let westeurope = price("Standard_D8s_v5", "West Europe").expect("offered in westeurope");
        assert!((eastus.linux_payg - 0.384).abs() < 1e-9, "{eastus:?}");
        assert!(
            (westeurope.linux_payg - 0.46).abs() < 1e-9,
            "{westeurope:?}"
        );
        // ND H200 is not offered in eastus; its regions say where it is.
        assert_eq!(price("Standard_ND96isr_H200_v5", "eastus"), None);
        assert!(regions_offering("Standard_ND96isr_H200_v5").contains(&"eastus2"));
        assert_eq!(price("Standard_Nope_v9", "eastus"), None);
    }

    #[test]
    fn retired_and_retiring_sizes_say_when() {
        let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date");
        let nc = shipped_size("Standard_NC6s_v3").expect("NC6s_v3 still listed");
        assert_eq!(
            nc.retirement(day("2026-11-26")),
            Some(Retirement::Retired(day("2025-09-30")))
        );
        assert_eq!(
            nc.retirement(day("2025-01-01")),
            Some(Retirement::Retiring(day("2025-09-30")))
        );
        assert_eq!(
            shipped_size("Standard_D8ds_v5").and_then(|s| s.retirement_date),
            None
        );
    }

    #[test]
    fn live_facts_fill_only_what_the_shipped_row_leaves_unknown() {
        // Standard_D4_v4: the shipped sources do not say its temp disk.
        let shipped = shipped_size("Standard_D4_v4").expect("shipped").clone();
        assert_eq!(shipped.temp_disk_gib, None);
        let live = VmSize {
            temp_disk_gib: Some(0),
            vcpus: 99,
            facts: Cow::Borrowed(LIVE_FACTS),
            ..shipped.clone()
        };
        let mut catalog = Catalog::shipped();
        assert_eq!(catalog.learn(live), Learnt::Filled);
        let learned = catalog.vm_size("standard_d4_v4").expect("found");
        assert_eq!(learned.temp_disk_gib, Some(0));
        assert_eq!(
            learned.vcpus, shipped.vcpus,
            "a shipped fact is never replaced"
        );
        assert_eq!(learned.facts, LIVE_FILLED_FACTS);
        assert!(
            !learned.is_live(),
            "it keeps its shipped prices and regions"
        );
        // Another command's catalog is its own: nothing process-wide was learnt.
        assert_eq!(Catalog::shipped().vm_size("Standard_D4_v4"), Some(&shipped));
        // Nothing to fill: the shipped row stays what lookups find.
        let full = shipped_size("Standard_D8ds_v5").expect("shipped");
        assert_eq!(catalog.learn(full.clone()), Learnt::Known);
        assert!(std::ptr::eq(
            catalog.vm_size("Standard_D8ds_v5").expect("found"),
            full
        ));
        // A size Azure added after the table: learnt as it is, and saved plans carry it back.
        let new = VmSize {
            name: Cow::Owned("Standard_Z9_v9".to_owned()),
            facts: Cow::Borrowed(LIVE_FACTS),
            ..shipped
        };
        assert_eq!(catalog.learn(new.clone()), Learnt::New);
        let json = serde_json::to_string(catalog.learned()).expect("serializes");
        let back: Vec<VmSize> = serde_json::from_str(&json).expect("deserializes");
        let again = Catalog::with_learned(back);
        assert_eq!(again.vm_size("standard_z9_v9"), Some(&new));
        assert_eq!(again, catalog);
    }

    #[test]
    fn a_size_without_temp_disk_finds_its_d_sibling() {
        let find = |name: &str| {
            shipped_size(name)
                .and_then(with_temp_disk)
                .map(|s| (&*s.name, s.temp_disk_gib))
        };
        assert_eq!(
            find("Standard_D4s_v5"),
            Some(("Standard_D4ds_v5", Some(150)))
        );
        assert_eq!(
            find("Standard_D16s_v5"),
            Some(("Standard_D16ds_v5", Some(600)))
        );
        assert_eq!(
            without_disk_letter("Standard_NC24ads_A100_v4").as_deref(),
            Some("Standard_NC24as_A100_v4")
        );
        assert_eq!(without_disk_letter("Standard_D4s_v5"), None);
        assert_eq!(without_disk_letter("Standard_ND40rs_v2"), None);
    }

    #[test]
    fn v5_sizes_without_the_d_letter_have_no_temp_disk_where_stated() {
        // From the v5 generation on, a temp disk is what the `d` letter says; a row that states
        // a temp disk for a v5 size without it is a bad source row.
        // (The HPC sizes, HBv5 among them, have a temp disk whatever their letters say.)
        for size in vm_sizes()
            .iter()
            .filter(|s| s.name.starts_with("Standard_D") || s.name.starts_with("Standard_E"))
        {
            if size.name.ends_with("s_v5") && without_disk_letter(&size.name).is_none() {
                assert!(
                    matches!(size.temp_disk_gib, None | Some(0)),
                    "{}",
                    size.name
                );
            }
        }
    }
}
