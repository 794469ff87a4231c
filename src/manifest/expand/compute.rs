//! `vm` and `cluster` blocks: public IP, NIC, VM and auto-shutdown per node, plus a proximity
//! placement group for clusters and, for clusters of an InfiniBand size, an availability set (the
//! cluster's one InfiniBand fabric, see [`push_fabric`]). The attributes both share (size, image,
//! key, disk, park) are read once by [`Machine::read`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::catalog::{self, GpuArch, Retirement, VmSize};
use crate::diag::{Diagnostic, Span, did_you_mean};
use crate::model::{Attrs, Lifecycle, ResourceKind};

use super::super::decode::{self, BlockAttrs, Located, OneOf, Ref, Unknown};
use super::super::eval::EvalBlock;
use super::super::images::{self, ImageError, ImageRef};
use super::super::names;
use super::super::validate::{ssh_key, time};
use super::super::values::MAX_NODES;
use super::check::Check;
use super::security::{self, Security};
use super::targets::{self, DiskSku, Zone};
use super::{Attachment, Expander, NetworkInfo, Origin, steps};

/// Usernames Azure refuses for Linux VMs.
const RESERVED_USERS: [&str; 31] = [
    "1",
    "123",
    "a",
    "actuser",
    "adm",
    "admin",
    "admin1",
    "admin2",
    "administrator",
    "aspnet",
    "backup",
    "console",
    "david",
    "guest",
    "john",
    "owner",
    "root",
    "server",
    "sql",
    "support",
    "support_388945a0",
    "sys",
    "test",
    "test1",
    "test2",
    "test3",
    "user",
    "user1",
    "user2",
    "user3",
    "user4",
];

/// The attributes `vm` and `cluster` blocks share.
#[derive(Deserialize, Default)]
struct MachineAttrs {
    size: Option<Located<String>>,
    sizes: Option<Located<Vec<String>>>,
    image: Option<Located<String>>,
    trusted_launch: Option<Located<bool>>,
    secure_boot: Option<Located<bool>>,
    ssh_key: Option<Located<Vec<String>>>,
    admin_username: Option<Located<String>>,
    os_disk_gb: Option<Located<i64>>,
    os_disk_sku: Option<OneOf<DiskSku>>,
    zone: Option<OneOf<Zone>>,
    network: Option<Ref<targets::Network>>,
    subnet: Option<Located<String>>,
}

impl BlockAttrs for MachineAttrs {}

/// A `vm` block's own attributes.
#[derive(Deserialize, Default)]
struct VmAttrs {
    public_ip: Option<bool>,
}

impl BlockAttrs for VmAttrs {}

/// A `cluster` block's own attributes.
#[derive(Deserialize, Default)]
struct ClusterAttrs {
    count: Option<Located<i64>>,
    head_public_ip: Option<bool>,
    placement_group: Option<bool>,
}

impl BlockAttrs for ClusterAttrs {}

/// An `image { ... }` block's attributes.
#[derive(Deserialize)]
struct ImageAttrs {
    publisher: Option<Located<String>>,
    offer: Option<Located<String>>,
    sku: Option<Located<String>>,
    version: Option<Located<String>>,
    generation: Option<Located<i64>>,
}

impl BlockAttrs for ImageAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[
        ("publisher", "\"Canonical\""),
        ("offer", "\"0001-com-ubuntu-server-jammy\""),
        ("sku", "\"22_04-lts-gen2\""),
    ];
}

/// A `park { ... }` block's attributes.
#[derive(Deserialize)]
struct ParkAttrs {
    at: Option<Located<String>>,
    time_zone: Option<Located<String>>,
}

impl BlockAttrs for ParkAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("at", "\"19:00\"")];
}

/// What every node of a `vm` or `cluster` has in common.
struct Machine {
    size: Option<Located<String>>,
    /// The ordered candidates of `sizes = [...]` (the first is `size`); empty without one. The
    /// plan resolves them against quota (engine::preflight).
    fallbacks: Vec<String>,
    info: Option<&'static VmSize>,
    image: Option<ImageRef>,
    security: Security,
    ssh_keys: Vec<String>,
    admin: String,
    os_disk_gb: Option<i64>,
    os_disk_sku: String,
    zone: Option<String>,
    network: Option<String>,
    subnet: Option<String>,
    park: Option<(String, String)>,
}

impl Machine {
    fn read(ex: &mut Expander<'_>, block: &EvalBlock) -> Self {
        let networks = ex.networks.clone();
        let location = ex.azure.location.clone();
        // Before decoding: a missing size is the block's first problem, as it always was.
        let size_missing = block.attr("sizes").is_none() && block.attr("size").is_none();
        if size_missing {
            ex.diags
                .push(decode::missing(block, "size", "\"Standard_NC6s_v3\""));
        }
        let attrs: MachineAttrs =
            decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
        let mut check = Check::new(block, ex.diags);
        let mut unknown = ex.unknown_sizes.as_mut();
        let (size, fallbacks) = read_sizes(
            &mut check,
            (attrs.size, attrs.sizes),
            &location,
            unknown.as_deref_mut(),
        );
        let info = size
            .as_ref()
            .and_then(|s| check_size(&mut check, s, &location, unknown));
        let image = read_image(&mut check, attrs.image, info);
        let security = security::choose(
            &mut check,
            (attrs.trusted_launch, attrs.secure_boot),
            image.as_ref(),
            info,
        );
        let ssh_keys = read_keys(&mut check, attrs.ssh_key);
        let admin = attrs
            .admin_username
            .filter(|u| check_username(&mut check, u))
            .map_or_else(|| "azureuser".to_owned(), |u| u.value);
        let os_disk_gb = check
            .in_range(attrs.os_disk_gb, "os_disk_gb", (30, 4095), " GiB")
            .map(|n| n.value);
        let os_disk_sku = attrs
            .os_disk_sku
            .filter(|s| premium_fits(&mut check, info, &s.value, s.span.clone(), "its OS disk"))
            .map_or_else(|| "StandardSSD_LRS".to_owned(), |s| s.value);
        let zone = attrs.zone.map(|z| z.value);
        let network = choose_network(&mut check, attrs.network, &networks);
        let subnets = network
            .as_ref()
            .and_then(|n| networks.get(n))
            .map(|n| n.subnets.clone())
            .unwrap_or_default();
        let subnet = choose_subnet(&mut check, attrs.subnet, &subnets);
        let park = block
            .block("park")
            .and_then(|p| read_park(check.diags_mut(), p));
        Self {
            size,
            fallbacks,
            info,
            image,
            security,
            ssh_keys,
            admin,
            os_disk_gb,
            os_disk_sku,
            zone,
            network,
            subnet,
            park,
        }
    }
}

/// The network: named by reference, or the only one there is.
fn choose_network(
    check: &mut Check<'_>,
    written: Option<Ref<targets::Network>>,
    networks: &BTreeMap<String, NetworkInfo>,
) -> Option<String> {
    if check.has("network") {
        return written.map(|r| r.address.trim_start_matches("network.").to_owned());
    }
    let title = check.title();
    let header = check.block().header.clone();
    let names: Vec<&String> = networks.keys().collect();
    match names.as_slice() {
        [only] => Some((*only).clone()),
        [] => {
            check.report(
                Diagnostic::error(format!("{title} needs a network"))
                    .with_span(header)
                    .with_help("add a `network \"main\" { ssh_from = [\"<your IP>/32\"] }` block"),
            );
            None
        }
        many => {
            check.report(
                Diagnostic::error(format!("{title} must say which network it uses"))
                    .with_span(header)
                    .with_help(format!(
                        "add `network = network.NAME`; the manifest has: {}",
                        many.iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
            );
            None
        }
    }
}

/// `subnet`, which the network must have; its first subnet when not written.
fn choose_subnet(
    check: &mut Check<'_>,
    written: Option<Located<String>>,
    subnets: &[String],
) -> Option<String> {
    match written {
        Some(s) if subnets.contains(&s.value) || subnets.is_empty() => Some(s.value),
        Some(s) => {
            let d = Diagnostic::error(format!("network has no subnet `{}`", s.value))
                .with_span(s.span.clone())
                .with_label("unknown subnet");
            check.report(
                match did_you_mean(&s.value, subnets.iter().map(String::as_str)) {
                    Some(m) => d.with_help(format!("did you mean `{m}`?")),
                    None => d.with_help(format!("subnets: {}", subnets.join(", "))),
                },
            );
            None
        }
        None => subnets.first().cloned(),
    }
}

/// `size = "..."`, or an ordered fallback `sizes = ["...", "..."]` whose first entry stands for the
/// size until the plan resolves it. Every candidate must be a known size.
fn read_sizes(
    check: &mut Check<'_>,
    (size, sizes): (Option<Located<String>>, Option<Located<Vec<String>>>),
    location: &str,
    mut unknown: Option<&mut Vec<String>>,
) -> (Option<Located<String>>, Vec<String>) {
    if !check.has("sizes") {
        return (size, Vec::new());
    }
    let title = check.title();
    if check.has("size") {
        check.report(
            Diagnostic::error(format!("{title} sets both `size` and `sizes`"))
                .with_span(check.span_of("sizes"))
                .with_label("an ordered list of sizes to try")
                .with_help(
                    "keep `sizes` (the plan picks the first that has quota) or `size`, not both",
                ),
        );
        return (None, Vec::new());
    }
    let Some(sizes) = sizes else {
        return (None, Vec::new());
    };
    if sizes.value.is_empty() {
        check.report(
            Diagnostic::error(format!("`sizes` in {title} is empty"))
                .with_span(sizes.span)
                .with_help("list at least one size, e.g. sizes = [\"Standard_ND40rs_v2\", \"Standard_ND96asr_v4\"]"),
        );
        return (None, Vec::new());
    }
    for later in &sizes.value[1..] {
        let candidate = Located {
            value: later.clone(),
            span: sizes.span.clone(),
        };
        check_size(check, &candidate, location, unknown.as_deref_mut());
    }
    let first = Located {
        value: sizes.value[0].clone(),
        span: sizes.span.clone(),
    };
    (Some(first), sizes.value)
}

/// A size must be one Azure has (the catalog's full list), offered in the manifest's region;
/// a retired or retiring size is a warning with its date.
fn check_size(
    check: &mut Check<'_>,
    size: &Located<String>,
    location: &str,
    unknown: Option<&mut Vec<String>>,
) -> Option<&'static VmSize> {
    let title = check.title();
    let Some(info) = catalog::vm_size(&size.value) else {
        if let Some(unknown) = unknown {
            unknown.push(size.value.clone());
            return None;
        }
        let d = Diagnostic::error(format!("unknown VM size `{}` in {title}", size.value))
            .with_span(size.span.clone())
            .with_label("not a size Azure offers (as of the shipped catalog)");
        check.report(match did_you_mean(&size.value, catalog::vm_size_names()) {
            Some(s) => d.with_help(format!(
                "did you mean `{s}`? (`dsinfra sizes` lists every size)"
            )),
            None => d.with_help(
                "`dsinfra sizes` lists every size with its facts and price; `--gpu` the GPU ones",
            ),
        });
        return None;
    };
    match info.retirement(catalog::today()) {
        Some(Retirement::Retired(date)) => check.report(
            Diagnostic::warning(format!("VM size `{}` was retired on {date}", info.name))
                .with_span(size.span.clone())
                .with_label("Azure no longer creates VMs of this size")
                .with_help(replacement_help(info, location)),
        ),
        Some(Retirement::Retiring(date)) => check.report(
            Diagnostic::warning(format!("VM size `{}` retires on {date}", info.name))
                .with_span(size.span.clone())
                .with_label("Azure stops running VMs of this size on that date")
                .with_help(replacement_help(info, location)),
        ),
        None => {}
    }
    // A size learnt from the subscription's Resource SKUs has no shipped price rows; the
    // preflight checks where it is offered.
    if !info.is_live()
        && catalog::is_known_location(location)
        && catalog::price(info.name, location).is_none()
    {
        let regions = catalog::regions_offering(info.name);
        check.report(
            Diagnostic::error(format!("VM size `{}` is not offered in {location}", info.name))
                .with_span(size.span.clone())
                .with_label(format!("no {location} offer in the shipped catalog"))
                .with_help(format!(
                    "regions that offer it: {}; or pick a size offered here: `dsinfra sizes --region {location}`",
                    list_some(&regions, 12)
                )),
        );
    }
    Some(info)
}

/// Premium SSDs attach only to sizes with premium IO (an `s` in the name, by Azure's convention;
/// Dv2 and the A-series have none): Azure refuses the VM otherwise, after the plan was approved.
/// Unknown premium IO passes: the catalog does not guess. Returns false when it reported.
fn premium_fits(
    check: &mut Check<'_>,
    info: Option<&VmSize>,
    sku: &str,
    span: Span,
    what: &str,
) -> bool {
    let Some(size) = info.filter(|s| s.premium_io == Some(false)) else {
        return true;
    };
    if !sku.starts_with("Premium") {
        return true;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!(
            "{title} cannot use a {sku} disk for {what}: {} has no premium storage",
            size.name
        ))
        .with_span(span)
        .with_label(format!(
            "{} supports Standard HDD and Standard SSD only",
            size.name
        ))
        .with_help(premium_help(size)),
    );
    false
}

/// How to get premium storage: the size's premium sibling when the catalog has one
/// (`Standard_D4_v5` -> `Standard_D4s_v5`), else a Standard SSD.
fn premium_help(size: &VmSize) -> String {
    match catalog::with_premium_io(size) {
        Some(sibling) => format!(
            "use StandardSSD_LRS, or the same size with premium storage: {}",
            sibling.name
        ),
        None => "use StandardSSD_LRS, or a size with premium storage (an `s` size such as Standard_D4s_v5)".to_owned(),
    }
}

/// Every data disk attached to a size without premium IO must be Standard: the rule of
/// [`premium_fits`], reported at the disk's `attach_to`.
fn check_premium_data_disks(
    ex: &mut Expander<'_>,
    title: &str,
    info: Option<&VmSize>,
    disks: &[Attachment],
) {
    let Some(size) = info.filter(|s| s.premium_io == Some(false)) else {
        return;
    };
    for disk in disks {
        let sku = ex
            .resources
            .iter()
            .find(|r| r.address == disk.disk)
            .and_then(|r| r.attrs.get("sku"))
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned();
        if !sku.starts_with("Premium") {
            continue;
        }
        ex.diags.push(
            Diagnostic::error(format!(
                "{} is a {sku} disk, but {title} is {}, which has no premium storage",
                disk.disk.block_address(),
                size.name
            ))
            .with_span(disk.span.clone())
            .with_label(format!("attaches a {sku} disk to {title}"))
            .with_help(premium_help(size).replace(
                "use StandardSSD_LRS",
                "give the disk `sku = \"StandardSSD_LRS\"`",
            )),
        );
    }
}

/// What to say instead of a retiring size: where to find current ones.
fn replacement_help(info: &VmSize, location: &str) -> String {
    let filter = if info.gpus > 0.0 { " --gpu" } else { "" };
    format!("pick a current size: `dsinfra sizes{filter} --region {location}` lists them")
}

/// `a, b, c and 9 more`: a long list cut to what a diagnostic can show.
fn list_some(items: &[&str], at_most: usize) -> String {
    if items.len() <= at_most {
        return items.join(", ");
    }
    format!(
        "{} and {} more",
        items[..at_most].join(", "),
        items.len() - at_most
    )
}

/// `image = "alias"` (or a URN), or an `image { ... }` block; `ubuntu-22.04` when neither.
fn read_image(
    check: &mut Check<'_>,
    written: Option<Located<String>>,
    info: Option<&VmSize>,
) -> Option<ImageRef> {
    let title = check.title();
    let block = check.block();
    let (result, span, shown) = if let Some(image_block) = block.block("image") {
        if check.has("image") {
            check.report(
                Diagnostic::error(format!("{title} sets `image` twice"))
                    .with_span(image_block.header.clone())
                    .with_help("use either `image = \"alias\"` or an `image { ... }` block"),
            );
            return None;
        }
        let (image, sku) = image_from_block(check.diags_mut(), image_block)?;
        (images::check(image, info), image_block.header.clone(), sku)
    } else {
        let text = written.unwrap_or_else(|| Located {
            value: "ubuntu-22.04".to_owned(),
            span: block.header.clone(),
        });
        (images::resolve(&text.value, info), text.span, text.value)
    };
    match result {
        Ok(image) => {
            if let Some(size) = info.filter(|s| {
                s.gpu_arch.is_some_and(GpuArch::is_nvidia) && images::lacks_gpu_driver(&image)
            }) {
                check.report(gpu_driver_warning(&title, size, &shown, span));
            }
            Some(image)
        }
        Err(ImageError::Unknown) => {
            let d = Diagnostic::error(format!("unknown image `{shown}` in {title}"))
                .with_span(span)
                .with_label("not an image alias or publisher:offer:sku:version");
            check.report(match did_you_mean(&shown, images::alias_names()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "use one of {}, a URN `publisher:offer:sku:version`, or an `image {{ ... }}` block",
                    images::alias_names().collect::<Vec<_>>().join(", ")
                )),
            });
            None
        }
        Err(ImageError::Generation { needs, image }) => {
            let size = info.map_or("this size", |s| s.name);
            check.report(
                Diagnostic::error(format!("{size} needs a Generation {needs} image"))
                    .with_span(span)
                    .with_label(format!("`{shown}` is a Generation {image} image"))
                    .with_help(if needs == 2 {
                        "use an alias such as `ubuntu-22.04` or `hpc-ubuntu-22.04` (it picks the generation), or a `-gen2` SKU"
                    } else {
                        "use an alias such as `ubuntu-22.04` (it picks the generation), or a Generation 1 SKU"
                    }),
            );
            None
        }
    }
}

/// An `image { publisher offer sku version generation }` block, and its SKU (for messages).
fn image_from_block(
    diags: &mut Vec<Diagnostic>,
    image_block: &EvalBlock,
) -> Option<(ImageRef, String)> {
    let attrs: ImageAttrs = decode::decode(image_block, Unknown::Checked, diags)?;
    let generation =
        Check::new(image_block, diags).in_range(attrs.generation, "generation", (1, 2), "");
    let (Some(publisher), Some(offer), Some(sku)) = (attrs.publisher, attrs.offer, attrs.sku)
    else {
        return None;
    };
    let generation = generation.map_or_else(
        || images::generation_from_sku(&sku.value),
        // in_range checked the range 1..=2.
        |g| if g.value == 2 { 2 } else { 1 },
    );
    let image = ImageRef {
        publisher: publisher.value,
        offer: offer.value,
        sku: sku.value.clone(),
        version: attrs
            .version
            .map_or_else(|| "latest".to_owned(), |v| v.value),
        generation,
    };
    Some((image, sku.value))
}

/// Issue 13 item 10: a GPU size with a plain Ubuntu image boots without an NVIDIA driver, and
/// nothing said so until `nvidia-smi` failed on the node. See docs/decisions.md for why this is
/// a warning and not a driver step or the NVIDIA GPU driver VM extension.
fn gpu_driver_warning(title: &str, size: &VmSize, image: &str, span: Span) -> Diagnostic {
    let plural = if size.gpus > 1.0 { "s" } else { "" };
    Diagnostic::warning(format!(
        "{title} has {} x {} GPU{plural} but its image has no NVIDIA driver",
        size.gpus_text(),
        size.gpu_model
    ))
    .with_span(span)
    .with_label(format!(
        "`{image}` is plain Ubuntu: CUDA and nvidia-smi will find no GPU"
    ))
    .with_help(
        "use `image = \"dsvm-ubuntu-22.04\"` (Data Science VM: driver, CUDA, conda) or `image = \"hpc-ubuntu-22.04\"` (driver, CUDA, InfiniBand, MPI); both carry the driver for this GPU",
    )
}

/// `ssh_key`: one public key or a list of them (required; reported missing here rather than by
/// the decoder, so that it comes after the image's problems, as it always has).
fn read_keys(check: &mut Check<'_>, keys: Option<Located<Vec<String>>>) -> Vec<String> {
    let title = check.title();
    let Some(keys) = keys else {
        if !check.has("ssh_key") {
            let missing =
                decode::missing(check.block(), "ssh_key", "file(\"~/.ssh/id_ed25519.pub\")");
            check.report(missing);
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in &keys.value {
        match ssh_key::check(key) {
            Ok(k) => out.push(k),
            Err(ssh_key::KeyError::Private) => check.report(
                Diagnostic::error(format!("`ssh_key` in {title} is a private key"))
                    .with_span(keys.span.clone())
                    .with_label("a private key must never be in a manifest (it is not shown here)")
                    .with_help("use the public half, e.g. file(\"~/.ssh/id_ed25519.pub\")"),
            ),
            Err(ssh_key::KeyError::NotAKey(why)) => check.report(
                Diagnostic::error(format!("`ssh_key` in {title} is not an SSH public key"))
                    .with_span(keys.span.clone())
                    .with_label(why)
                    .with_help(
                        "give the contents of a .pub file, e.g. file(\"~/.ssh/id_ed25519.pub\")",
                    ),
            ),
        }
    }
    if keys.value.is_empty() {
        check.report(
            Diagnostic::error(format!("`ssh_key` in {title} is empty"))
                .with_span(keys.span)
                .with_help("password login is disabled, so at least one public key is needed"),
        );
    }
    out
}

fn check_username(check: &mut Check<'_>, user: &Located<String>) -> bool {
    let name = user.value.as_str();
    let why = if RESERVED_USERS.contains(&name.to_ascii_lowercase().as_str()) {
        Some("Azure reserves this name")
    } else if name.is_empty() || name.len() > 32 {
        Some("it must be 1 to 32 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        Some("use lowercase letters, digits, `_` and `-`, starting with a letter")
    } else {
        None
    };
    if let Some(why) = why {
        let title = check.title();
        check.report(
            Diagnostic::error(format!("invalid `admin_username` in {title}"))
                .with_span(user.span.clone())
                .with_label(why)
                .with_help("the default `azureuser` always works"),
        );
        return false;
    }
    true
}

fn read_park(diags: &mut Vec<Diagnostic>, park: &EvalBlock) -> Option<(String, String)> {
    let attrs: ParkAttrs = decode::decode(park, Unknown::Checked, diags)?;
    let mut check = Check::new(park, diags);
    let (at, zone) = (attrs.at, attrs.time_zone);
    let time = at.and_then(|at| match time::parse_hhmm(&at.value) {
        Ok(t) => Some(t),
        Err(why) => {
            check.report(
                Diagnostic::error("invalid park time")
                    .with_span(at.span)
                    .with_label(why)
                    .with_help("write the time as HH:MM, e.g. at = \"19:00\""),
            );
            None
        }
    });
    let zone = match zone {
        None => Some("UTC".to_owned()),
        Some(z) => {
            if let Some(w) = time::windows_zone(&z.value) {
                Some(w.to_owned())
            } else {
                let d = Diagnostic::error(format!("unknown time zone `{}`", z.value))
                    .with_span(z.span.clone())
                    .with_label("not a Windows time zone id or a known IANA name");
                check.report(match did_you_mean(&z.value, time::zone_names()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(
                        "use e.g. \"W. Europe Standard Time\", \"Europe/Berlin\" or \"UTC\"",
                    ),
                });
                None
            }
        }
    };
    Some((time?, zone?))
}

/// The most VMs Azure puts in one availability set, and so in one InfiniBand fabric.
const MAX_FABRIC_NODES: i64 = 200;

/// An InfiniBand cluster must fit in one availability set: more nodes cannot share its fabric,
/// and ARM would refuse the 201st VM in the middle of an apply.
fn check_fabric_count(check: &mut Check<'_>, count: i64) {
    if count <= MAX_FABRIC_NODES {
        return;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!(
            "{title} has {count} nodes, more than one InfiniBand fabric can hold"
        ))
        .with_span(check.span_of("count"))
        .with_label(format!(
            "at most {MAX_FABRIC_NODES} nodes of an InfiniBand size"
        ))
        .with_help(format!(
            "Azure connects VMs over InfiniBand only within one availability set, which holds at \
             most {MAX_FABRIC_NODES} VMs: use count <= {MAX_FABRIC_NODES}, or split the work over \
             several clusters"
        )),
    );
}

/// Fault and update domains of a cluster's availability set. One of each: a tightly coupled job
/// (MPI, NCCL, BeeOND striping over every node) dies with any one node, so spreading nodes over
/// fault domains buys no availability and only narrows where Azure can place them (published HPC
/// advice for GPU scale sets sets `platformFaultDomainCount = 1` for the same reason), and one
/// update domain means planned maintenance interrupts the job once instead of once per domain.
const FABRIC_DOMAINS: i64 = 1;

/// The availability set that puts a cluster of an InfiniBand size on one InfiniBand fabric: Azure
/// connects VMs over InfiniBand only within one availability set (or one single-placement-group
/// scale set), and a proximity placement group alone does not. Every node names it; a node can
/// join it only at creation, so `availability_set` forces a VM's replacement (model::kind). The
/// set goes in the cluster's placement group when it has one. Returns its address.
fn push_fabric(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    lifecycle: &Lifecycle,
    ppg: Option<&Address>,
) -> Address {
    let kind = block.ident.clone();
    let label = block.label().to_owned();
    let address = Address::new(&kind, &label, None, "availability_set");
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    // Aligned: the nodes have managed disks, which ARM refuses in a Classic set.
    attrs.insert("sku".into(), json!("Aligned"));
    attrs.insert("fault_domain_count".into(), json!(FABRIC_DOMAINS));
    attrs.insert("update_domain_count".into(), json!(FABRIC_DOMAINS));
    attrs.insert(
        "proximity_placement_group".into(),
        ppg.map_or(Json::Null, |p| json!(p.to_string())),
    );
    ex.push(
        address.clone(),
        ResourceKind::AvailabilitySet,
        names::compose(&ex.experiment.id, &label, "avset"),
        attrs,
        ppg.cloned(),
        Origin {
            parent: None,
            lifecycle,
            span: Some(&block.header),
        },
    );
    address
}

/// Expand a `vm` or `cluster` block: one node's resources are built in one place
/// ([`push_node`]), in the order Azure needs them (IP, NIC, VM, schedule).
pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock) {
    let machine = Machine::read(ex, block);
    let lifecycle = ex.lifecycle(block);
    let is_cluster = block.ident == "cluster";
    let nodes = Nodes::read(ex, block, &machine);
    let label = block.label().to_owned();
    let kind = block.ident.clone();
    let ppg_address = Address::new(&kind, &label, None, "ppg");
    if nodes.placement_group {
        push_placement_group(ex, block, &machine, &lifecycle, &ppg_address);
    }
    let ppg = nodes.placement_group.then_some(ppg_address);
    let fabric = (is_cluster && machine.info.is_some_and(|s| s.infiniband))
        .then(|| push_fabric(ex, block, &lifecycle, ppg.as_ref()));
    let block_address = format!("{kind}.{label}");
    let disks = ex
        .attachments
        .get(&block_address)
        .cloned()
        .unwrap_or_default();
    check_premium_data_disks(ex, &block.title(), machine.info, &disks);
    let kit = Kit {
        block,
        machine: &machine,
        lifecycle: &lifecycle,
        vnet: machine
            .network
            .as_ref()
            .map(|n| Address::new("network", n, None, "vnet")),
        nsg: machine
            .network
            .as_ref()
            .map(|n| Address::new("network", n, None, "nsg")),
        ppg,
        fabric,
        disks,
    };
    let primaries = (0..nodes.count)
        .map(|i| {
            push_node(
                ex,
                &kit,
                is_cluster.then_some(i),
                (i as usize) < nodes.public,
            )
        })
        .collect();
    ex.set_primaries(block, primaries);
    if let Some(why) = &machine.security.why {
        ex.notes.push((Address::block(&kind, &label), why.clone()));
    }
    let infiniband = machine.info.is_some_and(|s| s.infiniband);
    steps::expand(ex, block, is_cluster, infiniband, machine.size.as_ref());
}

/// How many nodes a block has, how many of them get a public IP, and whether they share a
/// proximity placement group.
struct Nodes {
    count: u32,
    public: usize,
    placement_group: bool,
}

impl Nodes {
    fn read(ex: &mut Expander<'_>, block: &EvalBlock, machine: &Machine) -> Self {
        if block.ident != "cluster" {
            let attrs: VmAttrs =
                decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
            return Self {
                count: 1,
                public: usize::from(attrs.public_ip.unwrap_or(true)),
                placement_group: false,
            };
        }
        let attrs: ClusterAttrs =
            decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
        let mut check = Check::new(block, ex.diags);
        let count = if check.has("count") {
            check
                .in_range(attrs.count, "count", (1, MAX_NODES), " nodes")
                .map_or(0, |c| c.value)
        } else {
            1
        };
        if machine.info.is_some_and(|s| s.infiniband) {
            check_fabric_count(&mut check, count);
        }
        Self {
            // The range check above bounds `count` by MAX_NODES, far below u32::MAX.
            count: u32::try_from(count).unwrap_or(0),
            public: usize::from(attrs.head_public_ip.unwrap_or(true)),
            placement_group: attrs.placement_group.unwrap_or(true),
        }
    }
}

/// What every node of one block is built from.
struct Kit<'a> {
    block: &'a EvalBlock,
    machine: &'a Machine,
    lifecycle: &'a Lifecycle,
    vnet: Option<Address>,
    nsg: Option<Address>,
    ppg: Option<Address>,
    fabric: Option<Address>,
    disks: Vec<Attachment>,
}

/// The proximity placement group of a cluster's nodes.
fn push_placement_group(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    machine: &Machine,
    lifecycle: &Lifecycle,
    address: &Address,
) {
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert("type".into(), json!("Standard"));
    attrs.insert(
        "vm_sizes".into(),
        json!(
            machine
                .size
                .as_ref()
                .map(|s| vec![s.value.clone()])
                .unwrap_or_default()
        ),
    );
    if let Some(zone) = &machine.zone {
        attrs.insert("zone".into(), json!(zone));
    }
    ex.push(
        address.clone(),
        ResourceKind::ProximityPlacementGroup,
        names::compose(&ex.experiment.id, block.label(), "ppg"),
        attrs,
        [],
        Origin {
            parent: None,
            lifecycle,
            span: Some(&block.header),
        },
    );
}

/// One node: its public IP (if it has one), NIC, VM and auto-shutdown schedule. Returns the
/// VM's address. `index` is the node's number in a cluster.
fn push_node(ex: &mut Expander<'_>, kit: &Kit<'_>, index: Option<u32>, public: bool) -> Address {
    let (kind, label) = (kit.block.ident.as_str(), kit.block.label());
    let id = ex.experiment.id.clone();
    let (vm_name, suffix) = match index {
        Some(i) => (names::compose(&id, label, &i.to_string()), format!("{i}-")),
        None => (names::compose(&id, label, ""), String::new()),
    };
    let pip = Address::new(kind, label, index, "public_ip");
    let nic = Address::new(kind, label, index, "nic");
    let vm = Address::new(kind, label, index, "vm");
    let header = Some(&kit.block.header);
    if public {
        let mut attrs = Attrs::new();
        attrs.insert("location".into(), ex.location());
        attrs.insert("sku".into(), json!("Standard"));
        attrs.insert("allocation".into(), json!("Static"));
        if let Some(zone) = &kit.machine.zone {
            attrs.insert("zone".into(), json!(zone));
        }
        let name = names::compose(&id, label, &format!("{suffix}pip"));
        let kind = ResourceKind::PublicIp;
        ex.push(
            pip.clone(),
            kind,
            name,
            attrs,
            [],
            Origin {
                parent: None,
                lifecycle: kit.lifecycle,
                span: header,
            },
        );
    }
    let (nic_attrs, nic_deps) = nic_attrs(ex, kit, public.then_some(&pip));
    let name = names::compose(&id, label, &format!("{suffix}nic"));
    let nic_kind = ResourceKind::NetworkInterface;
    ex.push(
        nic.clone(),
        nic_kind,
        name,
        nic_attrs,
        nic_deps,
        Origin {
            parent: None,
            lifecycle: kit.lifecycle,
            span: header,
        },
    );
    let (attrs, deps) = vm_attrs(ex, kit, &nic);
    let vm_kind = ResourceKind::VirtualMachine;
    ex.push(
        vm.clone(),
        vm_kind,
        vm_name.clone(),
        attrs,
        deps,
        Origin {
            parent: None,
            lifecycle: kit.lifecycle,
            span: header,
        },
    );
    if let Some((time, zone)) = &kit.machine.park {
        let mut attrs = Attrs::new();
        attrs.insert("location".into(), ex.location());
        attrs.insert("time".into(), json!(time));
        attrs.insert("time_zone".into(), json!(zone));
        attrs.insert("vm".into(), json!(vm.to_string()));
        attrs.insert("status".into(), json!("Enabled"));
        ex.push(
            Address::new(kind, label, index, "auto_shutdown"),
            ResourceKind::AutoShutdownSchedule,
            names::shutdown_schedule_name(&vm_name),
            attrs,
            [vm.clone()],
            Origin {
                parent: None,
                lifecycle: kit.lifecycle,
                span: header,
            },
        );
    }
    vm
}

/// A node's NIC: in the block's subnet, behind its network's NSG, with its public IP if any.
fn nic_attrs(ex: &Expander<'_>, kit: &Kit<'_>, pip: Option<&Address>) -> (Attrs, Vec<Address>) {
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert(
        "subnet".into(),
        json!(kit.vnet.as_ref().map(ToString::to_string)),
    );
    attrs.insert("subnet_name".into(), json!(kit.machine.subnet));
    attrs.insert(
        "nsg".into(),
        json!(kit.nsg.as_ref().map(ToString::to_string)),
    );
    attrs.insert(
        "public_ip".into(),
        pip.map_or(Json::Null, |p| json!(p.to_string())),
    );
    attrs.insert(
        "accelerated_networking".into(),
        json!(
            kit.machine
                .info
                .is_some_and(|s| s.accelerated_networking == Some(true))
        ),
    );
    let mut deps: Vec<Address> = kit.vnet.iter().chain(kit.nsg.iter()).cloned().collect();
    deps.extend(pip.cloned());
    (attrs, deps)
}

/// A node's VM body, in the plan's words, and what it waits for.
fn vm_attrs(ex: &Expander<'_>, kit: &Kit<'_>, nic: &Address) -> (Attrs, Vec<Address>) {
    let machine = kit.machine;
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert(
        "size".into(),
        json!(machine.size.as_ref().map(|s| s.value.clone())),
    );
    attrs.insert(
        "image".into(),
        machine.image.as_ref().map_or(Json::Null, ImageRef::to_json),
    );
    if !machine.fallbacks.is_empty() {
        // Resolved and removed by the plan (engine::preflight::resolve_sizes).
        attrs.insert("sizes".into(), json!(machine.fallbacks));
    }
    attrs.insert("admin_username".into(), json!(machine.admin));
    attrs.insert("ssh_public_keys".into(), json!(machine.ssh_keys));
    attrs.insert("os_disk_size_gb".into(), json!(machine.os_disk_gb));
    attrs.insert("os_disk_sku".into(), json!(machine.os_disk_sku));
    attrs.insert("zone".into(), json!(machine.zone));
    attrs.insert("nic".into(), json!(nic.to_string()));
    attrs.insert(
        "proximity_placement_group".into(),
        kit.ppg
            .as_ref()
            .map_or(Json::Null, |p| json!(p.to_string())),
    );
    if let Some(set) = &kit.fabric {
        attrs.insert("availability_set".into(), json!(set.to_string()));
    }
    attrs.insert(
        "data_disks".into(),
        json!(
            kit.disks
                .iter()
                .map(|d| json!({"lun": d.lun, "disk": d.disk.to_string()}))
                .collect::<Vec<_>>()
        ),
    );
    attrs.insert("password_auth_disabled".into(), json!(true));
    attrs.insert("security".into(), machine.security.to_json());
    let mut deps = vec![nic.clone()];
    deps.extend(kit.disks.iter().map(|d| d.disk.clone()));
    deps.extend(kit.ppg.iter().cloned());
    deps.extend(kit.fabric.iter().cloned());
    (attrs, deps)
}
