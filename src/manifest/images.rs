//! VM images: friendly aliases and the Gen1/Gen2 compatibility rule.
//!
//! Marketplace images come in two generations, and some VM sizes take only one: ND40rs_v2 and the
//! H100 sizes need Generation 2, older sizes such as D3_v2 boot only Generation 1. Data scientists
//! should not have to know this, so an alias (`ubuntu-22.04`, `dsvm-ubuntu-22.04`, ...) picks the
//! SKU of the right generation for the VM size; an explicit image is checked against the size.
//!
//! An explicit image's generation comes from the one image table the emulator reads too
//! ([`crate::catalog::images`]); an image it does not know and whose SKU does not say is not
//! refused offline, only warned about (Azure knows; the size's rule is checked at create).
//!
//! GPUs add one more rule. Azure's HPC image (`microsoft-dsvm:ubuntu-hpc:2204`) ships NVIDIA's
//! open kernel modules, which run Turing and newer GPUs only; for V100 (Volta: NCv3, NDv2)
//! Azure/azhpc-images publishes `2204-v100` with the proprietary modules. The alias picks by the
//! catalog's GPU architecture ([`crate::catalog::GpuArch`]), never by the size's name.

use crate::catalog::{GpuArch, VmSize, images as known_images};

/// A marketplace image reference with its generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ImageRef {
    /// Publisher (`Canonical`).
    pub publisher: String,
    /// Offer (`0001-com-ubuntu-server-jammy`).
    pub offer: String,
    /// SKU (`22_04-lts-gen2`).
    pub sku: String,
    /// Version (`latest`).
    pub version: String,
    /// Hyper-V generation, 1 or 2; `None` when it is not known offline (an image outside the
    /// shared table whose SKU does not say).
    pub generation: Option<u8>,
}

impl ImageRef {
    /// `publisher:offer:sku:version`, as a manifest writes it.
    pub fn urn(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.publisher, self.offer, self.sku, self.version
        )
    }

    /// The image as the VM's `image` attribute (what ARM's imageReference holds).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "publisher": self.publisher,
            "offer": self.offer,
            "sku": self.sku,
            "version": self.version,
        })
    }
}

struct Alias {
    name: &'static str,
    publisher: &'static str,
    offer: &'static str,
    gen1_sku: Option<&'static str>,
    gen2_sku: Option<&'static str>,
    /// The SKU for GPUs the default SKU's driver cannot run (see the module docs), if the image
    /// comes in such a variant.
    proprietary_driver_sku: Option<&'static str>,
    /// The Arm64 SKU (Generation 2), for Arm64 sizes, if the image comes in one.
    arm64_sku: Option<&'static str>,
}

static ALIASES: &[Alias] = &[
    Alias {
        name: "ubuntu-20.04",
        publisher: "Canonical",
        offer: "0001-com-ubuntu-server-focal",
        gen1_sku: Some("20_04-lts"),
        gen2_sku: Some("20_04-lts-gen2"),
        proprietary_driver_sku: None,
        arm64_sku: Some("20_04-lts-arm64"),
    },
    Alias {
        name: "ubuntu-22.04",
        publisher: "Canonical",
        offer: "0001-com-ubuntu-server-jammy",
        gen1_sku: Some("22_04-lts"),
        gen2_sku: Some("22_04-lts-gen2"),
        proprietary_driver_sku: None,
        arm64_sku: Some("22_04-lts-arm64"),
    },
    Alias {
        name: "ubuntu-24.04",
        publisher: "Canonical",
        offer: "ubuntu-24_04-lts",
        gen1_sku: Some("server-gen1"),
        gen2_sku: Some("server"),
        proprietary_driver_sku: None,
        arm64_sku: Some("server-arm64"),
    },
    Alias {
        name: "dsvm-ubuntu-20.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-2004",
        gen1_sku: Some("2004"),
        gen2_sku: Some("2004-gen2"),
        proprietary_driver_sku: None,
        arm64_sku: None,
    },
    Alias {
        name: "dsvm-ubuntu-22.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-2204",
        gen1_sku: Some("2204"),
        gen2_sku: Some("2204-gen2"),
        proprietary_driver_sku: None,
        arm64_sku: None,
    },
    Alias {
        name: "hpc-ubuntu-22.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-hpc",
        gen1_sku: None,
        gen2_sku: Some("2204"),
        proprietary_driver_sku: Some("2204-v100"),
        arm64_sku: None,
    },
];

/// Publishers whose images carry no NVIDIA driver: Canonical's plain Ubuntu. The DSVM and HPC
/// images (`microsoft-dsvm`) have one; other publishers' images (NVIDIA's own, a custom gallery
/// image) are not known here and are not second-guessed.
const NO_GPU_DRIVER_PUBLISHERS: [&str; 1] = ["Canonical"];

/// Whether the image is known to come without an NVIDIA driver (see [`NO_GPU_DRIVER_PUBLISHERS`]).
pub(super) fn lacks_gpu_driver(image: &ImageRef) -> bool {
    NO_GPU_DRIVER_PUBLISHERS
        .iter()
        .any(|p| p.eq_ignore_ascii_case(&image.publisher))
}

/// Every alias name, for "did you mean" and the docs.
pub(super) fn alias_names() -> impl Iterator<Item = &'static str> {
    ALIASES.iter().map(|a| a.name)
}

/// Why an image does not fit a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ImageError {
    /// Not an alias and not a `publisher:offer:sku:version` URN.
    Unknown,
    /// The size has an Arm64 processor and the image is x64, or the other way round.
    Architecture {
        /// The size is Arm64 (and the image is not).
        size_arm64: bool,
    },
    /// The size needs the other generation, which this image does not have.
    Generation {
        /// What the size needs.
        needs: u8,
        /// What the image is.
        image: u8,
    },
}

/// Resolve an alias or a URN (`publisher:offer:sku:version`) for a size (when known).
pub(super) fn resolve(text: &str, size: Option<&VmSize>) -> Result<ImageRef, ImageError> {
    if let Some(alias) = ALIASES.iter().find(|a| a.name.eq_ignore_ascii_case(text)) {
        let (sku, generation) = if size.is_some_and(VmSize::arm64) {
            // Arm64 sizes boot Arm64 images, all Generation 2 (issue 29, item 10).
            let sku = alias
                .arm64_sku
                .ok_or(ImageError::Architecture { size_arm64: true })?;
            (sku, 2)
        } else {
            x64_sku(alias, size)?
        };
        let image = ImageRef {
            publisher: alias.publisher.to_owned(),
            offer: alias.offer.to_owned(),
            sku: sku.to_owned(),
            version: "latest".to_owned(),
            generation: Some(generation),
        };
        return check(image, size);
    }
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() == 4 && parts.iter().all(|p| !p.is_empty()) {
        let image = ImageRef {
            publisher: parts[0].to_owned(),
            offer: parts[1].to_owned(),
            sku: parts[2].to_owned(),
            version: parts[3].to_owned(),
            generation: known_images::generation(parts[0], parts[1], parts[2]),
        };
        return check(image, size);
    }
    Err(ImageError::Unknown)
}

/// The SKU and generation an alias gives an x64 size: the generation the size boots, and the
/// proprietary-driver variant for the GPUs that need it.
fn x64_sku(alias: &Alias, size: Option<&VmSize>) -> Result<(&'static str, u8), ImageError> {
    let want_gen1 = size.is_some_and(VmSize::gen1_only);
    let (sku, generation) = match (want_gen1, alias.gen1_sku, alias.gen2_sku) {
        (true, Some(sku), _) | (false, Some(sku), None) => (sku, 1),
        (false, _, Some(sku)) => (sku, 2),
        (true, None, _) => return Err(ImageError::Generation { needs: 1, image: 2 }),
        (false, None, None) => return Err(ImageError::Unknown),
    };
    let needs_proprietary = size
        .and_then(|s| s.gpu_arch)
        .is_some_and(GpuArch::needs_proprietary_nvidia_driver);
    // The driver variant is published for the Generation 2 SKU only (so far, always the
    // generation these GPUs' sizes take).
    let sku = match alias.proprietary_driver_sku {
        Some(variant) if needs_proprietary && generation == 2 => variant,
        _ => sku,
    };
    Ok((sku, generation))
}

/// Check an explicit image against a size's generation rule. An image whose generation is not
/// known offline passes: the caller warns, and Azure decides at create.
pub(super) fn check(image: ImageRef, size: Option<&VmSize>) -> Result<ImageRef, ImageError> {
    // A known image of the other architecture: Azure refuses it on this size.
    if let (Some(size), Some(known)) = (
        size,
        known_images::known(&image.publisher, &image.offer, &image.sku),
    ) && known.arm64 != size.arm64()
    {
        return Err(ImageError::Architecture {
            size_arm64: size.arm64(),
        });
    }
    match size {
        Some(s) if s.gen2_only() && image.generation == Some(1) => {
            Err(ImageError::Generation { needs: 2, image: 1 })
        }
        Some(s) if s.gen1_only() && image.generation == Some(2) => {
            Err(ImageError::Generation { needs: 1, image: 2 })
        }
        _ => Ok(image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::shipped_size as vm_size;

    #[test]
    fn aliases_pick_the_generation_the_size_needs() {
        let nd = vm_size("Standard_ND40rs_v2");
        let d3 = vm_size("Standard_D3_v2");
        assert_eq!(
            resolve("ubuntu-22.04", nd).map(|i| i.sku),
            Ok("22_04-lts-gen2".into())
        );
        assert_eq!(
            resolve("ubuntu-22.04", d3).map(|i| i.sku),
            Ok("22_04-lts".into())
        );
        assert_eq!(
            resolve("dsvm-ubuntu-22.04", d3).map(|i| i.generation),
            Ok(Some(1))
        );
        assert_eq!(
            resolve("hpc-ubuntu-22.04", d3),
            Err(ImageError::Generation { needs: 1, image: 2 })
        );
        assert_eq!(resolve("windows", nd), Err(ImageError::Unknown));
    }

    /// Issue 13 item 12: the V100 sizes got the image whose driver cannot run their GPUs.
    #[test]
    fn the_hpc_alias_picks_the_v100_image_for_volta_gpus_and_the_default_for_newer_ones() {
        let urn = |size: &str| {
            resolve("hpc-ubuntu-22.04", vm_size(size))
                .expect("resolves")
                .urn()
        };
        for v100 in [
            "Standard_ND40rs_v2",
            "Standard_NC6s_v3",
            "Standard_NC24rs_v3",
        ] {
            assert_eq!(
                urn(v100),
                "microsoft-dsvm:ubuntu-hpc:2204-v100:latest",
                "{v100}"
            );
        }
        for newer in [
            "Standard_ND96asr_v4",
            "Standard_ND96isr_H100_v5",
            "Standard_NC4as_T4_v3",
            "Standard_HB120rs_v3",
        ] {
            assert_eq!(
                urn(newer),
                "microsoft-dsvm:ubuntu-hpc:2204:latest",
                "{newer}"
            );
        }
        // Other aliases have no driver variants.
        assert_eq!(
            resolve("dsvm-ubuntu-22.04", vm_size("Standard_ND40rs_v2")).map(|i| i.sku),
            Ok("2204-gen2".into())
        );
    }

    #[test]
    fn urns_are_checked_against_the_size() {
        let nd = vm_size("Standard_ND40rs_v2");
        assert_eq!(
            resolve(
                "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
                nd
            ),
            Err(ImageError::Generation { needs: 2, image: 1 })
        );
        let ok = resolve(
            "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
            nd,
        )
        .expect("gen2 fits");
        assert_eq!(ok.to_json()["version"], "latest");
    }

    /// Issue 29 item 10: Arm64 sizes got x64 images, which Azure refuses.
    #[test]
    fn arm64_sizes_get_arm64_images_or_an_error() {
        let arm = vm_size("Standard_D4ps_v5");
        assert_eq!(
            resolve("ubuntu-22.04", arm).map(|i| (i.sku, i.generation)),
            Ok(("22_04-lts-arm64".to_owned(), Some(2)))
        );
        assert_eq!(
            resolve("ubuntu-24.04", arm).map(|i| i.sku),
            Ok("server-arm64".to_owned())
        );
        assert_eq!(
            resolve("dsvm-ubuntu-22.04", arm),
            Err(ImageError::Architecture { size_arm64: true })
        );
        assert_eq!(
            resolve(
                "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
                arm
            ),
            Err(ImageError::Architecture { size_arm64: true })
        );
        assert_eq!(
            resolve(
                "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-arm64:latest",
                vm_size("Standard_D4s_v5")
            ),
            Err(ImageError::Architecture { size_arm64: false })
        );
    }

    /// Issue 29 item 6: the V100 HPC image's SKU does not say `gen2`, and the old rule (the SKU
    /// name, else Generation 1) refused it on the very size it is made for.
    #[test]
    fn urns_of_known_generation_2_images_are_generation_2_whatever_their_sku_says() {
        let nd = vm_size("Standard_ND40rs_v2");
        let image = resolve("microsoft-dsvm:ubuntu-hpc:2204-v100:latest", nd)
            .expect("the V100 HPC image fits ND40rs_v2");
        assert_eq!(image.generation, Some(2));
        assert_eq!(
            resolve(
                "microsoft-dsvm:ubuntu-hpc:2204:latest",
                vm_size("Standard_D3_v2")
            ),
            Err(ImageError::Generation { needs: 1, image: 2 })
        );
        // Not in the table, and the SKU does not say: not known, so not refused.
        let unknown = resolve("nvidia:ngc_azure_17_11:ngc-base-version-24_03_4:latest", nd)
            .expect("an unknown generation is not refused offline");
        assert_eq!(unknown.generation, None);
    }
}
