//! Marketplace images dsinfra knows without asking Azure: their Hyper-V generation and whether
//! they are Arm64 images.
//!
//! One table, read by the manifest (is an image's generation one the VM size boots?) and by the
//! emulator (what Azure decides from the image's generation). Two tables disagreed before:
//! the manifest judged `microsoft-dsvm:ubuntu-hpc:2204-v100` Generation 1 because its SKU does
//! not say `gen2`, while the emulator knew it is Generation 2 (issue 29, item 6).
//!
//! Azure knows every image's generation (`hyperVGeneration` of VirtualMachineImages_Get); this
//! table holds the images the manifest's aliases name, with the generations the aliases and the
//! emulator already agreed on (decision 57 says how sure that is). For any other image, a SKU that says `gen2` or `gen1` in its name is
//! taken at its word (the marketplace convention); otherwise the generation is not known offline.

/// A marketplace image (any version) and its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownImage {
    /// Publisher (`Canonical`).
    pub publisher: &'static str,
    /// Offer (`0001-com-ubuntu-server-jammy`).
    pub offer: &'static str,
    /// SKU (`22_04-lts-gen2`).
    pub sku: &'static str,
    /// Hyper-V generation, 1 or 2.
    pub generation: u8,
    /// An Arm64 image (for Arm64 sizes only); x64 otherwise.
    pub arm64: bool,
}

const fn image(
    publisher: &'static str,
    offer: &'static str,
    sku: &'static str,
    generation: u8,
) -> KnownImage {
    KnownImage {
        publisher,
        offer,
        sku,
        generation,
        arm64: false,
    }
}

/// An Arm64 image: Generation 2, as every Arm64 VM is.
const fn arm64_image(
    publisher: &'static str,
    offer: &'static str,
    sku: &'static str,
) -> KnownImage {
    KnownImage {
        publisher,
        offer,
        sku,
        generation: 2,
        arm64: true,
    }
}

/// Every image an alias can pick (manifest/images.rs), with its generation.
pub static KNOWN_IMAGES: &[KnownImage] = &[
    image("Canonical", "0001-com-ubuntu-server-focal", "20_04-lts", 1),
    image(
        "Canonical",
        "0001-com-ubuntu-server-focal",
        "20_04-lts-gen2",
        2,
    ),
    arm64_image(
        "Canonical",
        "0001-com-ubuntu-server-focal",
        "20_04-lts-arm64",
    ),
    image("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", 1),
    image(
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-gen2",
        2,
    ),
    arm64_image(
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-arm64",
    ),
    image("Canonical", "ubuntu-24_04-lts", "server-gen1", 1),
    image("Canonical", "ubuntu-24_04-lts", "server", 2),
    arm64_image("Canonical", "ubuntu-24_04-lts", "server-arm64"),
    image("microsoft-dsvm", "ubuntu-2004", "2004", 1),
    image("microsoft-dsvm", "ubuntu-2004", "2004-gen2", 2),
    image("microsoft-dsvm", "ubuntu-2204", "2204", 1),
    image("microsoft-dsvm", "ubuntu-2204", "2204-gen2", 2),
    // The HPC images are Generation 2 only, and their SKUs do not say so.
    image("microsoft-dsvm", "ubuntu-hpc", "2204", 2),
    image("microsoft-dsvm", "ubuntu-hpc", "2204-v100", 2),
];

/// The image in [`KNOWN_IMAGES`], compared as ARM compares names (case-insensitively).
pub fn known(publisher: &str, offer: &str, sku: &str) -> Option<&'static KnownImage> {
    KNOWN_IMAGES.iter().find(|i| {
        i.publisher.eq_ignore_ascii_case(publisher)
            && i.offer.eq_ignore_ascii_case(offer)
            && i.sku.eq_ignore_ascii_case(sku)
    })
}

/// The Hyper-V generation of an image: from [`KNOWN_IMAGES`] (which wins over the SKU's name),
/// else from a SKU name that says `gen2` or `gen1`; `None` when neither tells (Azure does: read
/// `hyperVGeneration` when connected).
pub fn generation(publisher: &str, offer: &str, sku: &str) -> Option<u8> {
    if let Some(image) = known(publisher, offer, sku) {
        return Some(image.generation);
    }
    let sku = sku.to_ascii_lowercase();
    if sku.contains("gen2") {
        Some(2)
    } else if sku.contains("gen1") {
        Some(1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_knows_the_hpc_images_are_generation_2_whatever_their_sku_says() {
        for sku in ["2204", "2204-v100", "2204-V100"] {
            assert_eq!(
                generation("microsoft-dsvm", "ubuntu-hpc", sku),
                Some(2),
                "{sku}"
            );
        }
        assert_eq!(
            generation("Canonical", "ubuntu-24_04-lts", "server"),
            Some(2)
        );
        assert_eq!(
            generation("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"),
            Some(1)
        );
    }

    #[test]
    fn other_images_are_judged_by_their_sku_name_or_not_at_all() {
        assert_eq!(
            generation(
                "Canonical",
                "0001-com-ubuntu-pro-jammy",
                "pro-22_04-lts-gen2"
            ),
            Some(2)
        );
        assert_eq!(generation("someone", "their-image", "v3-gen1"), Some(1));
        assert_eq!(
            generation("nvidia", "ngc_azure_17_11", "ngc-base-version-24_03_4"),
            None
        );
    }

    #[test]
    fn every_row_is_unique() {
        for (i, a) in KNOWN_IMAGES.iter().enumerate() {
            assert!(
                KNOWN_IMAGES[i + 1..]
                    .iter()
                    .all(|b| known(b.publisher, b.offer, b.sku) != Some(a)),
                "{a:?} twice"
            );
        }
    }
}
