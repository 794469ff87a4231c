//! Marketplace images dsinfra knows without asking Azure: their Hyper-V generation, whether
//! they are Arm64 images, whether they support Trusted Launch, and their OS disk's size.
//!
//! One table, read by the manifest (is an image's generation one the VM size boots? may the
//! block state Trusted Launch?) and by the emulator (what Azure decides from the image, and what
//! VirtualMachineImages_Get answers). Two tables disagreed before: the manifest judged
//! `microsoft-dsvm:ubuntu-hpc:2204-v100` Generation 1 because its SKU does not say `gen2`, while
//! the emulator knew it is Generation 2 (issue 29, item 6).
//!
//! Azure knows every image's facts (VirtualMachineImages_Get: `hyperVGeneration`,
//! `architecture`, the `SecurityType` feature; the OS disk's size is not in its 2024-11-01
//! answer); this table holds the images the manifest's aliases name, with what decisions 57 and
//! 61 say of how sure each fact is. A fact not known is `None`; the connected plan reads what
//! VirtualMachineImages_Get answers. For any other image, a SKU that says
//! `gen2` or `gen1` in its name is taken at its word (the marketplace convention); otherwise the
//! generation is not known offline.

/// A marketplace image (any version) and its facts.
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
    /// Whether its `features` say `SecurityType: TrustedLaunchSupported` (or a value that
    /// includes it): `Some(false)` for Generation 1 images, `None` where not known here.
    pub trusted_launch: Option<bool>,
    /// Its OS disk's size in GiB: a VM's OS disk when the request names none. `None` where not
    /// known here (VirtualMachineImages_Get does not say it).
    pub os_disk_gb: Option<u32>,
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
        // Trusted Launch needs a Generation 2 VM, and so a Generation 2 image.
        trusted_launch: if generation == 1 { Some(false) } else { None },
        os_disk_gb: None,
    }
}

/// An Arm64 image: Generation 2, as every Arm64 VM is.
const fn arm64_image(
    publisher: &'static str,
    offer: &'static str,
    sku: &'static str,
) -> KnownImage {
    KnownImage {
        arm64: true,
        ..image(publisher, offer, sku, 2)
    }
}

impl KnownImage {
    /// The image advertises Trusted Launch support.
    const fn trusted_launch(self) -> Self {
        Self {
            trusted_launch: Some(true),
            ..self
        }
    }

    /// Its OS disk is `gb` GiB.
    const fn os_disk(self, gb: u32) -> Self {
        Self {
            os_disk_gb: Some(gb),
            ..self
        }
    }
}

/// The OS disk of Canonical's Ubuntu server images, every release and architecture.
const UBUNTU_OS_DISK_GB: u32 = 30;

/// Every image an alias can pick (manifest/images.rs), with its generation.
pub static KNOWN_IMAGES: &[KnownImage] = &[
    // Canonical's Generation 2 x64 server images advertise Trusted Launch (decision 61).
    image("Canonical", "0001-com-ubuntu-server-focal", "20_04-lts", 1).os_disk(UBUNTU_OS_DISK_GB),
    image(
        "Canonical",
        "0001-com-ubuntu-server-focal",
        "20_04-lts-gen2",
        2,
    )
    .trusted_launch()
    .os_disk(UBUNTU_OS_DISK_GB),
    arm64_image(
        "Canonical",
        "0001-com-ubuntu-server-focal",
        "20_04-lts-arm64",
    )
    .os_disk(UBUNTU_OS_DISK_GB),
    image("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", 1).os_disk(UBUNTU_OS_DISK_GB),
    image(
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-gen2",
        2,
    )
    .trusted_launch()
    .os_disk(UBUNTU_OS_DISK_GB),
    arm64_image(
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-arm64",
    )
    .os_disk(UBUNTU_OS_DISK_GB),
    image("Canonical", "ubuntu-24_04-lts", "server-gen1", 1).os_disk(UBUNTU_OS_DISK_GB),
    image("Canonical", "ubuntu-24_04-lts", "server", 2)
        .trusted_launch()
        .os_disk(UBUNTU_OS_DISK_GB),
    arm64_image("Canonical", "ubuntu-24_04-lts", "server-arm64").os_disk(UBUNTU_OS_DISK_GB),
    // The DSVM images: Trusted Launch support and OS disk size not known here.
    image("microsoft-dsvm", "ubuntu-2004", "2004", 1),
    image("microsoft-dsvm", "ubuntu-2004", "2004-gen2", 2),
    image("microsoft-dsvm", "ubuntu-2204", "2204", 1),
    image("microsoft-dsvm", "ubuntu-2204", "2204-gen2", 2),
    // The HPC images are Generation 2 only, and their SKUs do not say so. Trusted Launch
    // support not known here (issue 29, item 3): the connected plan reads it.
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

/// Whether an image supports Trusted Launch, as far as known offline: the table's fact, else
/// `Some(false)` for a Generation 1 image (by [`generation`]); `None` otherwise.
pub fn trusted_launch(publisher: &str, offer: &str, sku: &str) -> Option<bool> {
    if let Some(image) = known(publisher, offer, sku) {
        return image.trusted_launch;
    }
    (generation(publisher, offer, sku) == Some(1)).then_some(false)
}

/// What VirtualMachineImages_Get's `features` say of Trusted Launch: `SecurityType` values
/// `TrustedLaunchSupported`, `TrustedLaunchAndConfidentialVmSupported` and `TrustedLaunch`
/// (an image that needs it) include it; `Standard` and `ConfidentialVmSupported` do not; an
/// image without the feature has no Trusted Launch support.
pub fn security_type_allows_trusted_launch(security_type: Option<&str>) -> bool {
    security_type.is_some_and(|t| {
        let t = t.to_ascii_lowercase();
        t.starts_with("trustedlaunch")
    })
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
    fn trusted_launch_support_is_known_for_the_plain_ubuntu_images_only() {
        assert_eq!(
            trusted_launch(
                "Canonical",
                "0001-com-ubuntu-server-jammy",
                "22_04-lts-gen2"
            ),
            Some(true)
        );
        assert_eq!(
            trusted_launch("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"),
            Some(false)
        );
        assert_eq!(
            trusted_launch("microsoft-dsvm", "ubuntu-hpc", "2204-v100"),
            None
        );
        assert_eq!(
            trusted_launch("someone", "their-image", "v3-gen1"),
            Some(false)
        );
        assert_eq!(trusted_launch("someone", "their-image", "v3"), None);
        for allows in [
            "TrustedLaunchSupported",
            "TrustedLaunchAndConfidentialVmSupported",
            "TrustedLaunch",
        ] {
            assert!(
                security_type_allows_trusted_launch(Some(allows)),
                "{allows}"
            );
        }
        for refuses in [None, Some("Standard"), Some("ConfidentialVmSupported")] {
            assert!(!security_type_allows_trusted_launch(refuses), "{refuses:?}");
        }
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
