//! The marketplace as VirtualMachineImages_List and VirtualMachineImages_Get show it (compute
//! 2024-11-01, `virtualMachineImage.json`): an image's versions, and one version's generation,
//! architecture and `features`, of which a client reads the `SecurityType` to know whether the
//! image supports Trusted Launch (issue 29, item 3).
//!
//! The emulator's marketplace is the shared image table ([`crate::catalog::images`]); an image
//! it does not know exists too (the emulator cannot list Azure's marketplace), with the
//! generation its SKU name says (else 1, as the VM handler judges it). Trusted Launch support is
//! the table's fact where it has one; an image the table leaves unknown, or does not know, is
//! taken to support it when Generation 2, unless the configuration names it in
//! `no_trusted_launch_images` (tests use that for the refusal).

use serde_json::{Value, json};

use crate::catalog::images as table;
use crate::emulator::config::{EmulatorConfig, normalize_location};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};

/// The one version the emulator's marketplace has of every image.
pub(crate) const VERSION: &str = "1.0.20241101";

/// What the emulator knows of an image.
pub(crate) struct Image {
    pub generation: u8,
    pub arm64: bool,
    pub trusted_launch: bool,
}

/// The emulator's facts of `publisher:offer:sku`.
pub(crate) fn image(config: &EmulatorConfig, publisher: &str, offer: &str, sku: &str) -> Image {
    let known = table::known(publisher, offer, sku);
    let generation = table::generation(publisher, offer, sku).unwrap_or(1);
    let refused = config.no_trusted_launch_images.iter().any(|urn| {
        let parts: Vec<&str> = urn.split(':').collect();
        parts.len() >= 3
            && parts[0].eq_ignore_ascii_case(publisher)
            && parts[1].eq_ignore_ascii_case(offer)
            && parts[2].eq_ignore_ascii_case(sku)
    });
    // The table's fact (Generation 1 images: none), else the emulator's marketplace default.
    let trusted_launch =
        table::trusted_launch(publisher, offer, sku).unwrap_or(generation == 2 && !refused);
    Image {
        generation,
        arm64: known.is_some_and(|k| k.arm64) || sku.to_ascii_lowercase().contains("arm64"),
        trusted_launch,
    }
}

/// The image a VM body's storage profile names, if it names a marketplace image.
pub(crate) fn of_profile(config: &EmulatorConfig, storage_profile: &Value) -> Option<Image> {
    let part = |name: &str| {
        storage_profile
            .pointer(&format!("/imageReference/{name}"))
            .and_then(Value::as_str)
    };
    Some(image(
        config,
        part("publisher")?,
        part("offer")?,
        part("sku")?,
    ))
}

/// `.../locations/{l}/publishers/{p}/artifacttypes/vmimage/offers/{o}/skus/{s}/versions[/{v}]`.
/// `rest` is the path after the location.
pub(crate) fn handle(
    ctx: &Ctx<'_>,
    sub: &str,
    location: &str,
    rest: &[String],
) -> Option<Result<Reply, ArmError>> {
    let is = |i: usize, word: &str| rest.get(i).is_some_and(|s| s.eq_ignore_ascii_case(word));
    let image_path = is(0, "publishers")
        && is(2, "artifacttypes")
        && is(3, "vmimage")
        && is(4, "offers")
        && is(6, "skus")
        && is(8, "versions")
        && rest.len() <= 10;
    if !image_path {
        return None;
    }
    if ctx.method != "GET" {
        return Some(Err(ArmError::method_not_allowed(&ctx.method)));
    }
    let (publisher, offer, sku) = (&rest[1], &rest[5], &rest[7]);
    let location = normalize_location(location);
    let base = format!(
        "/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{sku}/Versions"
    );
    let Some(version) = rest.get(9) else {
        // VirtualMachineImages_List: a bare array of VirtualMachineImageResource.
        return Some(Ok(Reply::json(
            200,
            json!([{"location": location, "name": VERSION, "id": format!("{base}/{VERSION}")}]),
        )));
    };
    if !version.eq_ignore_ascii_case(VERSION) {
        return Some(Err(ArmError::new(
            404,
            "NotFound",
            "Artifact: VMImage was not found.",
        )));
    }
    let facts = image(ctx.config, publisher, offer, sku);
    let mut features = vec![json!({"name": "IsAcceleratedNetworkSupported", "value": "True"})];
    if facts.trusted_launch {
        features.push(json!({"name": "SecurityType", "value": "TrustedLaunchSupported"}));
    }
    Some(Ok(Reply::json(
        200,
        json!({
            "location": location,
            "name": VERSION,
            "id": format!("{base}/{VERSION}"),
            "properties": {
                "hyperVGeneration": format!("V{}", facts.generation),
                "architecture": if facts.arm64 { "Arm64" } else { "x64" },
                "osDiskImage": {"operatingSystem": "Linux"},
                "dataDiskImages": [],
                "features": features,
            },
        }),
    )))
}
