//! What an experiment costs per hour, running and parked, from the offline price catalog.
//!
//! VM compute is priced in each VM's own region (its `location` attribute): prices differ by
//! region by tens of percent, and a size with no price there is said to be unpriced rather than
//! priced from another region.
//!
//! Only what dominates an experiment's bill is priced: VM compute (billed only while running),
//! managed disks including OS disks, and public IPs (both billed whether the VM runs or is
//! parked). Storage accounts, shares and containers are billed by usage and shown as unpriced.
//! Each cluster node is its own VM resource, so nodes count individually. The attribute names read
//! here are the manifest layer's: VM `size`, `os_disk_size_gb`, `os_disk_sku`; disk `size_gb`,
//! `sku`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::Address;
use crate::catalog::{self, Price};
use crate::model::{Attrs, ResourceKind};

/// $/hour of one resource in each power state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// While running (for non-VMs: always).
    pub running_per_hour: f64,
    /// While parked (VMs deallocated; everything else is billed as when running).
    pub parked_per_hour: f64,
}

impl Rate {
    fn is_zero(self) -> bool {
        self.running_per_hour.abs() < f64::EPSILON && self.parked_per_hour.abs() < f64::EPSILON
    }
}

/// The price of one resource before and after the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceCost {
    /// The resource.
    pub address: Address,
    /// What is priced (`Standard_NC4as_T4_v3 + 128 GiB Premium_LRS OS disk`).
    pub what: String,
    /// Its rate now, if it exists now.
    pub before: Option<Rate>,
    /// Its rate after the plan, if it exists then.
    pub after: Option<Rate>,
}

/// Totals of one world (before or after the plan).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CostTotals {
    /// $/hour with every VM running.
    pub running_per_hour: f64,
    /// $/hour with every VM parked.
    pub parked_per_hour: f64,
    /// 30-day projection with every VM running.
    pub running_per_month: f64,
    /// 30-day projection with every VM parked.
    pub parked_per_month: f64,
}

impl CostTotals {
    fn add(&mut self, rate: Rate) {
        self.running_per_hour = micro(self.running_per_hour + rate.running_per_hour);
        self.parked_per_hour = micro(self.parked_per_hour + rate.parked_per_hour);
        self.running_per_month = micro(self.running_per_hour * catalog::HOURS_PER_MONTH);
        self.parked_per_month = micro(self.parked_per_hour * catalog::HOURS_PER_MONTH);
    }
}

/// Round to a millionth of a dollar: far below what the prices mean, and it keeps JSON plans and
/// snapshots free of float noise (`3.0870027397260276`).
fn micro(amount: f64) -> f64 {
    (amount * 1e6).round() / 1e6
}

/// The cost section of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostSummary {
    /// Region the experiment runs in: the VMs are priced there.
    pub location: String,
    /// When the shipped prices were read from Azure's price list.
    pub price_date: String,
    /// Hours in the monthly projection.
    pub hours_per_month: f64,
    /// Every priced resource, in plan order.
    pub resources: Vec<ResourceCost>,
    /// Totals now.
    pub before: CostTotals,
    /// Totals after the plan.
    pub after: CostTotals,
    /// Issue 18: what each block with `park { idle }` saves while its watcher has parked it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<IdleSaving>,
    /// Issue 34: what each block of spot VMs costs against the same VMs at pay-as-you-go, after
    /// the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spot: Vec<SpotSaving>,
}

/// A block of spot VMs: their compute at the catalog's spot price and at pay-as-you-go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpotSaving {
    /// The `vm` or `cluster` block.
    pub block: Address,
    /// How many spot VMs it has after the plan.
    pub vms: usize,
    /// Their compute at the spot price, $/hour.
    pub spot_per_hour: f64,
    /// The same compute at pay-as-you-go, $/hour.
    pub on_demand_per_hour: f64,
}

impl SpotSaving {
    /// What spot saves per hour.
    pub fn saves_per_hour(&self) -> f64 {
        micro(self.on_demand_per_hour - self.spot_per_hour)
    }

    /// The saving as a whole percentage of the on-demand price.
    pub fn saves_percent(&self) -> f64 {
        if self.on_demand_per_hour <= 0.0 {
            return 0.0;
        }
        (100.0 * self.saves_per_hour() / self.on_demand_per_hour).round()
    }
}

/// What parking one block when idle saves: its VMs' running rate less their parked rate (the
/// disks of a parked VM still bill), after the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleSaving {
    /// The `vm` or `cluster` block.
    pub block: Address,
    /// The idle window, in seconds.
    pub window_s: u64,
    /// How many VMs the watcher parks.
    pub vms: usize,
    /// $/hour saved while they are parked.
    pub saves_per_hour: f64,
}

impl CostSummary {
    /// Price what parking each idle block saves, from the rows already priced (`park_idle` is
    /// [`crate::model::Desired::park_idle`]). A block the plan deletes saves nothing.
    pub(super) fn price_idle(&mut self, park_idle: &BTreeMap<Address, Duration>) {
        self.idle = park_idle
            .iter()
            .filter_map(|(block, window)| {
                let vms: Vec<Rate> = self
                    .resources
                    .iter()
                    .filter(|r| r.address.block_address() == *block && r.address.part == "vm")
                    .filter_map(|r| r.after)
                    .collect();
                (!vms.is_empty()).then(|| IdleSaving {
                    block: block.clone(),
                    window_s: window.as_secs(),
                    vms: vms.len(),
                    saves_per_hour: micro(
                        vms.iter()
                            .map(|r| r.running_per_hour - r.parked_per_hour)
                            .sum(),
                    ),
                })
            })
            .collect();
    }
}

impl CostSummary {
    /// Price `(address, kind, before attrs, after attrs)` rows.
    pub(super) fn from_rows<'a>(
        rows: impl IntoIterator<
            Item = (
                &'a Address,
                ResourceKind,
                Option<&'a Attrs>,
                Option<&'a Attrs>,
            ),
        >,
    ) -> Self {
        let mut summary = Self {
            location: String::new(),
            price_date: catalog::prices_date()
                .map(|d| d.to_string())
                .unwrap_or_default(),
            hours_per_month: catalog::HOURS_PER_MONTH,
            resources: Vec::new(),
            before: CostTotals::default(),
            after: CostTotals::default(),
            idle: Vec::new(),
            spot: Vec::new(),
        };
        for (address, kind, before, after) in rows {
            if let Some((vms, spot, on_demand)) = after.and_then(|a| spot_compute(kind, a)) {
                summary.add_spot(address.block_address(), vms, (spot, on_demand));
            }
            let before = before.map(|a| rate_of(kind, a));
            let after_rate = after.map(|a| rate_of(kind, a));
            if let Some((rate, _)) = before {
                summary.before.add(rate);
            }
            if let Some((rate, _)) = after_rate {
                summary.after.add(rate);
            }
            // A VM whose size has no price in its region stays in the table, saying so: a
            // missing price must not look like a free VM.
            let shown = |r: Option<(Rate, String)>| {
                r.filter(|(rate, what)| !rate.is_zero() || what.ends_with(UNPRICED))
            };
            let (b, a) = (shown(before), shown(after_rate));
            if b.is_none() && a.is_none() {
                continue;
            }
            let what = a
                .as_ref()
                .or(b.as_ref())
                .map(|(_, what)| what.clone())
                .unwrap_or_default();
            summary.resources.push(ResourceCost {
                address: address.clone(),
                what,
                before: b.map(|(r, _)| r),
                after: a.map(|(r, _)| r),
            });
        }
        summary
    }
}

impl CostSummary {
    fn add_spot(&mut self, block: Address, vms: usize, (spot, on_demand): (f64, f64)) {
        if let Some(row) = self.spot.iter_mut().find(|r| r.block == block) {
            row.vms += vms;
            row.spot_per_hour = micro(row.spot_per_hour + spot);
            row.on_demand_per_hour = micro(row.on_demand_per_hour + on_demand);
        } else {
            self.spot.push(SpotSaving {
                block,
                vms,
                spot_per_hour: micro(spot),
                on_demand_per_hour: micro(on_demand),
            });
        }
    }
}

/// How many VMs of a spot VM (one) or a low-priority AmlCompute (its nodes) a resource is, and
/// their compute per hour at the spot price and at pay-as-you-go, when the size has both in its
/// region.
fn spot_compute(kind: ResourceKind, attrs: &Attrs) -> Option<(usize, f64, f64)> {
    let vms = match (kind, text(attrs, "priority")) {
        (ResourceKind::VirtualMachine, Some("Spot")) => 1,
        (ResourceKind::MlCompute, Some("LowPriority")) => {
            usize::try_from(attrs.get("count").and_then(Value::as_u64)?).ok()?
        }
        _ => return None,
    };
    let price = catalog::price(text(attrs, "size")?, text(attrs, "location")?)?;
    // Node counts are small: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let n = vms as f64;
    Some((vms, n * price.spot?, n * price.linux_payg))
}

fn text<'a>(attrs: &'a Attrs, key: &str) -> Option<&'a str> {
    attrs.get(key).and_then(Value::as_str)
}

fn gib(attrs: &Attrs, key: &str) -> Option<u32> {
    attrs
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// The smallest OS disk of Azure's marketplace Linux images (Canonical's Ubuntu): the price of an
/// OS disk whose image the table does not know is at least this one's.
const MIN_OS_DISK_GB: u32 = 30;

/// The OS disk size of the VM's image, from the shared image table.
fn image_os_disk_gb(attrs: &Attrs) -> Option<u32> {
    let image = attrs.get("image")?;
    let part = |k: &str| image.get(k).and_then(Value::as_str);
    catalog::images::known(part("publisher")?, part("offer")?, part("sku")?)?.os_disk_gb
}

/// How a VM's description ends when its size has no price in its region.
const UNPRICED: &str = ": unpriced)";

/// The rate of one resource and a description of what was priced.
pub fn rate_of(kind: ResourceKind, attrs: &Attrs) -> (Rate, String) {
    match kind {
        ResourceKind::VirtualMachine => {
            let size = text(attrs, "size").unwrap_or("unknown size");
            let region = text(attrs, "location").unwrap_or_default();
            // Prices are shipped only: a size learnt from live Resource SKUs has none. A spot VM
            // is priced at the catalog's spot price; without one (a size learnt live), at
            // pay-as-you-go, the most Azure bills a spot VM whose cap is -1.
            let spot = text(attrs, "priority") == Some("Spot");
            let (compute, mut what) = match catalog::price(size, region) {
                Some(Price {
                    spot: Some(price),
                    linux_payg,
                }) if spot => (price, format!("{size} spot (${linux_payg:.3}/h on-demand)")),
                Some(price) if spot => (
                    price.linux_payg,
                    format!("{size} spot (no spot price: priced at pay-as-you-go)"),
                ),
                Some(price) => (price.linux_payg, size.to_owned()),
                None => (0.0, format!("{size} (no {region} price{UNPRICED}")),
            };
            let disk = match (gib(attrs, "os_disk_size_gb"), text(attrs, "os_disk_sku")) {
                (Some(gib), Some(sku)) => {
                    let _ = write!(what, " + {gib} GiB {sku} OS disk");
                    catalog::disk_price_per_hour(sku, gib)
                }
                // Azure makes the OS disk the image's size (issue 29: a parked cluster looked
                // almost free while its OS disks still bill).
                (None, Some(sku)) => {
                    // An image the table does not know: at least the smallest.
                    let (gib, bound) = match image_os_disk_gb(attrs) {
                        Some(gib) => (gib, ""),
                        None => (MIN_OS_DISK_GB, "at least "),
                    };
                    let _ = write!(what, " + {bound}{gib} GiB {sku} OS disk");
                    catalog::disk_price_per_hour(sku, gib)
                }
                _ => 0.0,
            };
            let rate = Rate {
                running_per_hour: micro(compute + disk),
                parked_per_hour: micro(disk),
            };
            (rate, what)
        }
        ResourceKind::ManagedDisk => {
            let sku = text(attrs, "sku").unwrap_or("Standard_LRS");
            let size = gib(attrs, "size_gb").unwrap_or(0);
            let price = micro(catalog::disk_price_per_hour(sku, size));
            let rate = Rate {
                running_per_hour: price,
                parked_per_hour: price,
            };
            (rate, format!("{size} GiB {sku} disk"))
        }
        ResourceKind::MlCompute => ml_compute_rate(attrs),
        // A cluster parked by stopping deallocates its System pool's nodes too.
        ResourceKind::AksCluster => aks_rate(
            attrs,
            ("system_size", "system_count", "AKS System pool"),
            text(attrs, "park") != Some("stop"),
        ),
        ResourceKind::AksPool => aks_rate(attrs, ("size", "count", "AKS node pool"), false),
        ResourceKind::PublicIp => {
            let rate = Rate {
                running_per_hour: catalog::PUBLIC_IP_PER_HOUR,
                parked_per_hour: catalog::PUBLIC_IP_PER_HOUR,
            };
            (rate, "Standard static public IP".to_owned())
        }
        _ => (Rate::default(), String::new()),
    }
}

/// An AmlCompute cluster: its size's price in its region per node, times `count` (Azure Machine
/// Learning adds no surcharge for compute). Low-priority nodes take the catalog's spot price,
/// the same discounted capacity; without one they are priced at pay-as-you-go, an upper bound
/// the description admits. Parked, a cluster is scaled to zero nodes: nothing is billed.
fn ml_compute_rate(attrs: &Attrs) -> (Rate, String) {
    let size = text(attrs, "size").unwrap_or("unknown size");
    let region = text(attrs, "location").unwrap_or_default();
    let count = attrs.get("count").and_then(Value::as_u64).unwrap_or(0);
    let low_priority = text(attrs, "priority") == Some("LowPriority");
    let (per_node, note) = match catalog::price(size, region) {
        Some(Price {
            spot: Some(spot), ..
        }) if low_priority => (spot, " low priority"),
        Some(price) if low_priority => (
            price.linux_payg,
            " low priority (no spot price in the catalog: priced at pay-as-you-go)",
        ),
        Some(price) => (price.linux_payg, ""),
        None => {
            let what = format!("{count} x {size} AmlCompute (no {region} price{UNPRICED}");
            return (Rate::default(), what);
        }
    };
    // Node counts are small: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let nodes = count as f64;
    let rate = Rate {
        running_per_hour: micro(per_node * nodes),
        parked_per_hour: 0.0,
    };
    (rate, format!("{count} x {size} AmlCompute{note}"))
}

/// An AKS cluster's System pool (`keeps_nodes`: billed parked too, as park leaves it its nodes)
/// or a named pool (parked at zero nodes: nothing): the size's price in the region per node.
/// The control plane of AKS's Free tier, which dsinfra asks for, costs nothing; the nodes' OS
/// disks are not priced (AKS picks an ephemeral or managed disk per size).
fn aks_rate(
    attrs: &Attrs,
    (size_key, count_key, noun): (&str, &str, &str),
    keeps_nodes: bool,
) -> (Rate, String) {
    let size = text(attrs, size_key).unwrap_or("unknown size");
    let region = text(attrs, "location").unwrap_or_default();
    let count = attrs.get(count_key).and_then(Value::as_u64).unwrap_or(0);
    let what = format!("{count} x {size} {noun}");
    let Some(price) = catalog::price(size, region) else {
        return (
            Rate::default(),
            format!("{what} (no {region} price{UNPRICED}"),
        );
    };
    // Node counts are small: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let running = micro(price.linux_payg * count as f64);
    let rate = Rate {
        running_per_hour: running,
        parked_per_hour: if keeps_nodes { running } else { 0.0 },
    };
    (rate, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(pairs: &[(&str, Value)]) -> Attrs {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn vm_compute_is_billed_only_while_running_but_its_os_disk_always() {
        let vm = attrs(&[
            ("size", Value::from("Standard_NC4as_T4_v3")),
            ("location", Value::from("eastus")),
            ("os_disk_size_gb", Value::from(128)),
            ("os_disk_sku", Value::from("Premium_LRS")),
        ]);
        let (rate, what) = rate_of(ResourceKind::VirtualMachine, &vm);
        let disk = catalog::disk_price_per_hour("Premium_LRS", 128);
        assert!(disk > 0.0);
        assert!((rate.parked_per_hour - disk).abs() < 1e-6);
        assert!(
            (rate.running_per_hour - (0.526 + disk)).abs() < 1e-6,
            "{rate:?}"
        );
        assert_eq!(what, "Standard_NC4as_T4_v3 + 128 GiB Premium_LRS OS disk");
    }

    /// Issue 29: without `os_disk_size_gb` the OS disk was left out, so a parked cluster looked
    /// almost free; it is the image's size (Ubuntu's 30 GiB), or at least that when not known.
    #[test]
    fn a_vm_without_an_os_disk_size_is_priced_at_its_images_os_disk() {
        let vm = |image: Value| {
            attrs(&[
                ("size", Value::from("Standard_NC4as_T4_v3")),
                ("location", Value::from("eastus")),
                ("os_disk_size_gb", Value::Null),
                ("os_disk_sku", Value::from("StandardSSD_LRS")),
                ("image", image),
            ])
        };
        let disk = catalog::disk_price_per_hour("StandardSSD_LRS", 30);
        assert!(disk > 0.0);
        let (rate, what) = rate_of(
            ResourceKind::VirtualMachine,
            &vm(
                json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2", "version": "latest"}),
            ),
        );
        assert!((rate.parked_per_hour - disk).abs() < 1e-6, "{rate:?}");
        assert!(
            what.ends_with(" + 30 GiB StandardSSD_LRS OS disk"),
            "{what}"
        );
        let (rate, what) = rate_of(
            ResourceKind::VirtualMachine,
            &vm(
                json!({"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"}),
            ),
        );
        assert!((rate.parked_per_hour - disk).abs() < 1e-6, "{rate:?}");
        assert!(
            what.ends_with(" + at least 30 GiB StandardSSD_LRS OS disk"),
            "{what}"
        );
    }

    /// Issue 34: a spot VM is priced at the catalog's spot price in its region, says the
    /// on-demand price beside it, and its block's saving is summed; a regular VM is not in it.
    #[test]
    fn spot_vms_take_the_spot_price_and_their_block_says_what_it_saves() {
        let node = |priority: Option<&str>| {
            let mut a = attrs(&[
                ("size", Value::from("Standard_ND40rs_v2")),
                ("location", Value::from("eastus")),
            ]);
            if let Some(p) = priority {
                a.insert("priority".into(), Value::from(p));
            }
            a
        };
        let price = catalog::price("Standard_ND40rs_v2", "eastus").expect("priced");
        let spot = price.spot.expect("a spot price");
        let (rate, what) = rate_of(ResourceKind::VirtualMachine, &node(Some("Spot")));
        assert!((rate.running_per_hour - spot).abs() < 1e-6, "{rate:?}");
        assert_eq!(
            what,
            format!(
                "Standard_ND40rs_v2 spot (${:.3}/h on-demand)",
                price.linux_payg
            )
        );
        let (rate, _) = rate_of(ResourceKind::VirtualMachine, &node(None));
        assert!((rate.running_per_hour - price.linux_payg).abs() < 1e-6);
        let spot_node = node(Some("Spot"));
        let regular = node(None);
        let addresses: Vec<Address> = ["cluster.train[0].vm", "cluster.train[1].vm", "vm.prep.vm"]
            .iter()
            .map(|a| a.parse().expect("address"))
            .collect();
        let summary = CostSummary::from_rows([
            (
                &addresses[0],
                ResourceKind::VirtualMachine,
                None,
                Some(&spot_node),
            ),
            (
                &addresses[1],
                ResourceKind::VirtualMachine,
                None,
                Some(&spot_node),
            ),
            (
                &addresses[2],
                ResourceKind::VirtualMachine,
                None,
                Some(&regular),
            ),
        ]);
        assert_eq!(summary.spot.len(), 1, "{:?}", summary.spot);
        let row = &summary.spot[0];
        assert_eq!(row.block.to_string(), "cluster.train");
        assert_eq!(row.vms, 2);
        assert!((row.spot_per_hour - 2.0 * spot).abs() < 1e-5);
        assert!((row.on_demand_per_hour - 2.0 * price.linux_payg).abs() < 1e-5);
        // ND40rs_v2 in eastus: $22.032 on demand, $4.0715 spot.
        assert!((row.saves_percent() - 82.0).abs() < f64::EPSILON, "{row:?}");
    }

    #[test]
    fn public_ips_and_disks_cost_the_same_parked() {
        let (ip, _) = rate_of(ResourceKind::PublicIp, &Attrs::new());
        assert_eq!(
            ip,
            Rate {
                running_per_hour: catalog::PUBLIC_IP_PER_HOUR,
                parked_per_hour: catalog::PUBLIC_IP_PER_HOUR
            }
        );
        let disk = attrs(&[
            ("size_gb", Value::from(1024)),
            ("sku", Value::from("Premium_LRS")),
        ]);
        let (rate, what) = rate_of(ResourceKind::ManagedDisk, &disk);
        assert!(rate.running_per_hour > 0.0);
        assert!((rate.running_per_hour - rate.parked_per_hour).abs() < f64::EPSILON);
        assert_eq!(what, "1024 GiB Premium_LRS disk");
        let (storage, _) = rate_of(ResourceKind::StorageAccount, &Attrs::new());
        assert!(storage.is_zero());
    }

    /// Issue 17: an AmlCompute is its size's price per node times its nodes, nothing parked
    /// (scaled to zero); a workspace and what it needs are billed by use, like storage.
    /// The System pool is billed parked unless the block parks by stopping the cluster, and it
    /// is named as the System pool either way; a named pool costs nothing parked.
    #[test]
    fn an_aks_system_pool_is_billed_parked_unless_the_cluster_stops() {
        let cluster = |park: &str| {
            rate_of(
                ResourceKind::AksCluster,
                &attrs(&[
                    ("system_size", Value::from("Standard_D4s_v5")),
                    ("system_count", Value::from(2)),
                    ("location", Value::from("eastus")),
                    ("park", Value::from(park)),
                ]),
            )
        };
        let price = catalog::price("Standard_D4s_v5", "eastus").expect("priced");
        let (pools, what) = cluster("pools");
        assert!((pools.running_per_hour - 2.0 * price.linux_payg).abs() < 1e-6);
        assert!((pools.parked_per_hour - pools.running_per_hour).abs() < f64::EPSILON);
        assert_eq!(what, "2 x Standard_D4s_v5 AKS System pool");
        let (stop, what) = cluster("stop");
        assert!(stop.parked_per_hour.abs() < f64::EPSILON);
        assert_eq!(what, "2 x Standard_D4s_v5 AKS System pool");
        let (pool, what) = rate_of(
            ResourceKind::AksPool,
            &attrs(&[
                ("size", Value::from("Standard_D4s_v5")),
                ("count", Value::from(3)),
                ("location", Value::from("eastus")),
            ]),
        );
        assert!((pool.running_per_hour - 3.0 * price.linux_payg).abs() < 1e-6);
        assert!(pool.parked_per_hour.abs() < f64::EPSILON);
        assert_eq!(what, "3 x Standard_D4s_v5 AKS node pool");
    }

    #[test]
    fn an_aml_compute_costs_its_nodes_and_nothing_parked() {
        let compute = |priority: &str, region: &str| {
            rate_of(
                ResourceKind::MlCompute,
                &attrs(&[
                    ("size", Value::from("Standard_ND40rs_v2")),
                    ("location", Value::from(region)),
                    ("count", Value::from(4)),
                    ("priority", Value::from(priority)),
                ]),
            )
        };
        let price = catalog::price("Standard_ND40rs_v2", "southcentralus").expect("priced");
        let (rate, what) = compute("Dedicated", "southcentralus");
        assert!((rate.running_per_hour - 4.0 * price.linux_payg).abs() < 1e-6);
        assert!(rate.parked_per_hour.abs() < f64::EPSILON);
        assert_eq!(what, "4 x Standard_ND40rs_v2 AmlCompute");
        let (low, what) = compute("LowPriority", "southcentralus");
        // Its block's saving is in the plan's spot lines, as a spot cluster's.
        let address: Address = "aml_cluster.scratch.compute".parse().expect("address");
        let summary = CostSummary::from_rows([(
            &address,
            ResourceKind::MlCompute,
            None,
            Some(&attrs(&[
                ("size", Value::from("Standard_ND40rs_v2")),
                ("location", Value::from("southcentralus")),
                ("count", Value::from(4)),
                ("priority", Value::from("LowPriority")),
            ])),
        )]);
        assert_eq!(summary.spot.len(), 1);
        assert_eq!(summary.spot[0].vms, 4);
        assert_eq!(summary.spot[0].block.to_string(), "aml_cluster.scratch");
        let spot = price
            .spot
            .expect("the catalog has a spot price for ND40rs_v2");
        assert!((low.running_per_hour - 4.0 * spot).abs() < 1e-6);
        assert_eq!(what, "4 x Standard_ND40rs_v2 AmlCompute low priority");
        // The shipped catalog has no brazilsouth row for this size: unpriced, not free.
        let (none, what) = compute("Dedicated", "brazilsouth");
        assert!(none.is_zero());
        assert_eq!(
            what,
            "4 x Standard_ND40rs_v2 AmlCompute (no brazilsouth price: unpriced)"
        );
        for kind in [
            ResourceKind::MlWorkspace,
            ResourceKind::KeyVault,
            ResourceKind::LogAnalyticsWorkspace,
            ResourceKind::AppInsights,
            ResourceKind::ContainerRegistry,
        ] {
            assert!(rate_of(kind, &Attrs::new()).0.is_zero(), "{kind:?}");
        }
    }

    #[test]
    fn totals_sum_before_and_after_with_a_monthly_projection() {
        let a: Address = "cluster.t[0].vm".parse().expect("valid");
        let b: Address = "cluster.t[1].vm".parse().expect("valid");
        let vm = attrs(&[
            ("size", Value::from("Standard_NC4as_T4_v3")),
            ("location", Value::from("eastus")),
        ]);
        let summary = CostSummary::from_rows([
            (&a, ResourceKind::VirtualMachine, Some(&vm), Some(&vm)),
            (&b, ResourceKind::VirtualMachine, None, Some(&vm)),
        ]);
        assert!((summary.before.running_per_hour - 0.526).abs() < 1e-9);
        assert!((summary.after.running_per_hour - 1.052).abs() < 1e-9);
        assert!((summary.after.running_per_month - 1.052 * 720.0).abs() < 1e-6);
        assert!(summary.after.parked_per_hour.abs() < f64::EPSILON);
        assert_eq!(summary.resources.len(), 2);
        assert_eq!(summary.resources[1].before, None);
    }

    #[test]
    fn a_vm_is_priced_in_its_own_region_and_unpriced_where_the_size_is_not_offered() {
        let vm = |size: &str, region: &str| {
            rate_of(
                ResourceKind::VirtualMachine,
                &attrs(&[
                    ("size", Value::from(size)),
                    ("location", Value::from(region)),
                ]),
            )
        };
        // The shipped catalog's prices for Standard_D8s_v5 (docs/catalog.md).
        let (east, _) = vm("Standard_D8s_v5", "eastus");
        let (west, _) = vm("Standard_D8s_v5", "westeurope");
        assert!((east.running_per_hour - 0.384).abs() < 1e-9, "{east:?}");
        assert!((west.running_per_hour - 0.46).abs() < 1e-9, "{west:?}");
        let (none, what) = vm("Standard_ND96isr_H200_v5", "eastus");
        assert!(none.is_zero());
        assert_eq!(what, "Standard_ND96isr_H200_v5 (no eastus price: unpriced)");
        // It stays in the plan's table, at zero, rather than vanishing like a free resource.
        let a: Address = "cluster.t[0].vm".parse().expect("valid");
        let h200 = attrs(&[
            ("size", Value::from("Standard_ND96isr_H200_v5")),
            ("location", Value::from("eastus")),
        ]);
        let summary =
            CostSummary::from_rows([(&a, ResourceKind::VirtualMachine, None, Some(&h200))]);
        assert_eq!(summary.resources.len(), 1);
        assert!(summary.resources[0].what.ends_with("unpriced)"));
    }
}
