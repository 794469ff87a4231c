//! What dsinfra knows about Azure without asking it: VM sizes, prices and regions.
//!
//! The plan needs vCPUs (quota), GPUs, temp-disk size (BeeOND, blobfuse caches), the quota family,
//! whether a size needs a Generation 2 image or has InfiniBand, and an hourly price, all offline.
//! Sizes come from the Azure size documentation (see `shared/reference/arm.md` section 6). Prices
//! are indicative pay-as-you-go Linux rates for [`PRICE_REGION`] as of [`PRICE_DATE`]; only the
//! H100, NC6 and NC6s_v3 rates were confirmed against public sources, the rest are from memory of
//! the retail price sheet and every plan says they are estimates. Other regions differ by roughly
//! +-20%; the plan names the region the prices are for.

mod locations;
mod sizes;

pub use locations::{LOCATIONS, is_known_location};

/// Region the prices are for.
pub const PRICE_REGION: &str = "eastus";
/// When the prices were recorded.
pub const PRICE_DATE: &str = "2026-11";
/// Hours in the 30-day projection the plan shows.
pub const HOURS_PER_MONTH: f64 = 720.0;

/// One VM size.
// The flags are independent facts from the size documentation, not a state machine.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VmSize {
    /// ARM size name, e.g. `Standard_ND40rs_v2`.
    pub name: &'static str,
    /// vCPUs: what the quota counts.
    pub vcpus: u32,
    /// Memory in GiB.
    pub memory_gib: u32,
    /// Local temp disk in GiB (0: none).
    pub temp_disk_gib: u32,
    /// Number of GPUs.
    pub gpus: u32,
    /// GPU model, empty for CPU sizes.
    pub gpu_model: &'static str,
    /// The GPU's NVIDIA architecture, `None` for CPU sizes: it decides which driver (and so
    /// which HPC image) can run the GPU.
    pub gpu_arch: Option<GpuArch>,
    /// The quota family ARM's usages API reports (`standardNDSv2Family`).
    pub quota_family: &'static str,
    /// Indicative $/hour while running.
    pub price_per_hour: f64,
    /// Accepts only Generation 2 images.
    pub gen2_only: bool,
    /// Accepts only Generation 1 images.
    pub gen1_only: bool,
    /// Has an InfiniBand (RDMA) interface.
    pub infiniband: bool,
    /// Supports accelerated networking on its NIC.
    pub accelerated_networking: bool,
    /// Retired by Azure: creating it fails; the plan warns.
    pub retired: bool,
}

/// NVIDIA GPU architectures of the sizes dsinfra knows, oldest first.
///
/// The architecture decides the driver: NVIDIA's open kernel modules, which the current HPC
/// images ship, run Turing and newer only; Volta (V100) needs the proprietary modules, which
/// Azure's HPC images publish as a separate `-v100` SKU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GpuArch {
    /// K80 (NC, NCv2: retired).
    Kepler,
    /// M60 (NVv3).
    Maxwell,
    /// V100 (NCv3, NDv2).
    Volta,
    /// T4 (NCasT4_v3).
    Turing,
    /// A100, A10 (NC A100 v4, ND A100 v4, NVadsA10 v5).
    Ampere,
    /// H100 (ND H100 v5).
    Hopper,
}

impl GpuArch {
    /// Whether NVIDIA's open kernel modules support it (Turing and newer); older GPUs need the
    /// proprietary modules.
    pub fn open_kernel_modules(self) -> bool {
        self >= Self::Turing
    }
}

/// Look a size up by its ARM name (case-insensitive, as ARM is).
pub fn vm_size(name: &str) -> Option<&'static VmSize> {
    sizes::SIZES
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The size that is `size` plus a local temp disk (`Standard_D4s_v5` -> `Standard_D4ds_v5`), if
/// the catalog knows one. Azure marks a temp disk with a `d` among the lower-case feature letters
/// after the vCPU count, and their order varies between series (`D4ads_v5`, `D4plds_v5`), so
/// the sibling is found by dropping that `d` from each known size with a temp disk rather than
/// by inserting it at a guessed position.
pub fn with_temp_disk(size: &VmSize) -> Option<&'static VmSize> {
    sizes::SIZES.iter().find(|s| {
        s.temp_disk_gib > 0
            && s.vcpus == size.vcpus
            && without_disk_letter(s.name).is_some_and(|n| n.eq_ignore_ascii_case(size.name))
    })
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

/// Every known size name, for "did you mean" suggestions.
pub fn vm_size_names() -> impl Iterator<Item = &'static str> {
    sizes::SIZES.iter().map(|s| s.name)
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
    fn sizes_are_sorted_and_unique() {
        let names: Vec<&str> = vm_size_names().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn every_gpu_size_names_its_architecture_and_only_gpu_sizes_do() {
        for name in vm_size_names() {
            let size = vm_size(name).expect("listed sizes are known");
            assert_eq!(size.gpus > 0, size.gpu_arch.is_some(), "{name}");
        }
    }

    #[test]
    fn seed_sizes_are_known_with_their_quota_family() {
        let nd = vm_size("standard_nd40rs_v2").expect("ND40rs_v2 known");
        assert_eq!(nd.vcpus, 40);
        assert_eq!(nd.gpus, 8);
        assert_eq!(nd.quota_family, "standardNDSv2Family");
        assert!(nd.gen2_only && nd.infiniband);
        assert_eq!(nd.gpu_arch, Some(GpuArch::Volta));
        let cpu = vm_size("Standard_D3_v2").expect("D3_v2 known");
        assert_eq!((cpu.vcpus, cpu.temp_disk_gib), (4, 200));
        assert_eq!(vm_size("Standard_NC6s_v3").map(|s| s.gpus), Some(1));
    }

    #[test]
    fn a_size_without_temp_disk_finds_its_d_sibling() {
        let find = |name: &str| {
            vm_size(name)
                .and_then(with_temp_disk)
                .map(|s| (s.name, s.temp_disk_gib))
        };
        assert_eq!(find("Standard_D4s_v5"), Some(("Standard_D4ds_v5", 150)));
        assert_eq!(find("Standard_D16s_v5"), Some(("Standard_D16ds_v5", 600)));
        // No sibling in the catalog: nothing is made up.
        assert_eq!(find("Standard_E4s_v5"), None);
        assert_eq!(
            without_disk_letter("Standard_NC24ads_A100_v4").as_deref(),
            Some("Standard_NC24as_A100_v4")
        );
        assert_eq!(without_disk_letter("Standard_D4s_v5"), None);
        assert_eq!(without_disk_letter("Standard_ND40rs_v2"), None);
    }

    #[test]
    fn every_size_states_its_temp_disk_as_documented() {
        // Sizes whose name has no `d` feature letter have no temp disk from the v5 generation on;
        // the older series (v2, v3) and the GPU/HPC sizes have one.
        for size in sizes::SIZES {
            if size.name.ends_with("s_v5") && without_disk_letter(size.name).is_none() {
                assert_eq!(size.temp_disk_gib, 0, "{}", size.name);
            }
        }
    }
}
