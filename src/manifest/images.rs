//! VM images: friendly aliases and the Gen1/Gen2 compatibility rule.
//!
//! Marketplace images come in two generations, and some VM sizes take only one: ND40rs_v2 and the
//! H100 sizes need Generation 2, older sizes such as D3_v2 boot only Generation 1. Data scientists
//! should not have to know this, so an alias (`ubuntu-22.04`, `dsvm-ubuntu-22.04`, ...) picks the
//! SKU of the right generation for the VM size; an explicit image is checked against the size.

use crate::catalog::VmSize;

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
    /// Hyper-V generation, 1 or 2.
    pub generation: u8,
}

impl ImageRef {
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
}

static ALIASES: &[Alias] = &[
    Alias {
        name: "ubuntu-20.04",
        publisher: "Canonical",
        offer: "0001-com-ubuntu-server-focal",
        gen1_sku: Some("20_04-lts"),
        gen2_sku: Some("20_04-lts-gen2"),
    },
    Alias {
        name: "ubuntu-22.04",
        publisher: "Canonical",
        offer: "0001-com-ubuntu-server-jammy",
        gen1_sku: Some("22_04-lts"),
        gen2_sku: Some("22_04-lts-gen2"),
    },
    Alias {
        name: "ubuntu-24.04",
        publisher: "Canonical",
        offer: "ubuntu-24_04-lts",
        gen1_sku: Some("server-gen1"),
        gen2_sku: Some("server"),
    },
    Alias {
        name: "dsvm-ubuntu-20.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-2004",
        gen1_sku: Some("2004"),
        gen2_sku: Some("2004-gen2"),
    },
    Alias {
        name: "dsvm-ubuntu-22.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-2204",
        gen1_sku: Some("2204"),
        gen2_sku: Some("2204-gen2"),
    },
    Alias {
        name: "hpc-ubuntu-22.04",
        publisher: "microsoft-dsvm",
        offer: "ubuntu-hpc",
        gen1_sku: None,
        gen2_sku: Some("2204"),
    },
];

/// Every alias name, for "did you mean" and the docs.
pub(super) fn alias_names() -> impl Iterator<Item = &'static str> {
    ALIASES.iter().map(|a| a.name)
}

/// Why an image does not fit a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ImageError {
    /// Not an alias and not a `publisher:offer:sku:version` URN.
    Unknown,
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
        let want_gen1 = size.is_some_and(|s| s.gen1_only);
        let (sku, generation) = match (want_gen1, alias.gen1_sku, alias.gen2_sku) {
            (true, Some(sku), _) | (false, Some(sku), None) => (sku, 1),
            (false, _, Some(sku)) => (sku, 2),
            (true, None, _) => return Err(ImageError::Generation { needs: 1, image: 2 }),
            (false, None, None) => return Err(ImageError::Unknown),
        };
        let image = ImageRef {
            publisher: alias.publisher.to_owned(),
            offer: alias.offer.to_owned(),
            sku: sku.to_owned(),
            version: "latest".to_owned(),
            generation,
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
            generation: generation_from_sku(parts[2]),
        };
        return check(image, size);
    }
    Err(ImageError::Unknown)
}

/// Marketplace convention: Generation 2 SKUs say so in their name (`22_04-lts-gen2`, `2204-gen2`).
pub(super) fn generation_from_sku(sku: &str) -> u8 {
    if sku.to_ascii_lowercase().contains("gen2") {
        2
    } else {
        1
    }
}

/// Check an explicit image against a size's generation rule.
pub(super) fn check(image: ImageRef, size: Option<&VmSize>) -> Result<ImageRef, ImageError> {
    match size {
        Some(s) if s.gen2_only && image.generation != 2 => Err(ImageError::Generation {
            needs: 2,
            image: image.generation,
        }),
        Some(s) if s.gen1_only && image.generation != 1 => Err(ImageError::Generation {
            needs: 1,
            image: image.generation,
        }),
        _ => Ok(image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::vm_size;

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
            Ok(1)
        );
        assert_eq!(
            resolve("hpc-ubuntu-22.04", d3),
            Err(ImageError::Generation { needs: 1, image: 2 })
        );
        assert_eq!(resolve("windows", nd), Err(ImageError::Unknown));
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
}
