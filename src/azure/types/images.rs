//! Marketplace images (compute 2024-11-01, `virtualMachineImage.json`): what
//! VirtualMachineImages_List and VirtualMachineImages_Get answer, as far as dsinfra reads them:
//! an image's versions, and one version's generation, architecture and `features`.

use serde::Deserialize;

/// One entry of VirtualMachineImages_List (a bare JSON array of these): a version.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VirtualMachineImageResource {
    /// The version (`22.04.202410020`).
    pub name: String,
}

/// VirtualMachineImages_Get: one version of an image.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct VirtualMachineImage {
    /// The version.
    #[serde(default)]
    pub name: String,
    /// Its properties.
    #[serde(default)]
    pub properties: VirtualMachineImageProperties,
}

/// `VirtualMachineImageProperties`, the parts dsinfra reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineImageProperties {
    /// `V1` or `V2`.
    #[serde(default)]
    pub hyper_v_generation: Option<String>,
    /// `x64` or `Arm64`.
    #[serde(default)]
    pub architecture: Option<String>,
    /// What the image supports (`SecurityType`, `IsAcceleratedNetworkSupported`, ...).
    #[serde(default)]
    pub features: Vec<ImageFeature>,
}

/// `VirtualMachineImageFeature`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ImageFeature {
    /// The feature's name.
    #[serde(default)]
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

impl VirtualMachineImage {
    /// The value of feature `name` (compared case-insensitively), if the image states it.
    pub fn feature(&self, name: &str) -> Option<&str> {
        self.properties
            .features
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value.as_str())
    }

    /// The Hyper-V generation, 1 or 2, if stated.
    pub fn generation(&self) -> Option<u8> {
        match self
            .properties
            .hyper_v_generation
            .as_deref()?
            .to_ascii_uppercase()
            .as_str()
        {
            "V1" => Some(1),
            "V2" => Some(2),
            _ => None,
        }
    }

    /// Whether it is an Arm64 image, if stated.
    pub fn arm64(&self) -> Option<bool> {
        self.properties
            .architecture
            .as_deref()
            .map(|a| a.eq_ignore_ascii_case("Arm64"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::response_body;

    #[test]
    fn the_spec_example_reads() {
        let body = response_body(
            "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-11-01/examples/virtualMachineImageExamples/VirtualMachineImage_Get_MaximumSet_Gen.json",
            "200",
        );
        let image: VirtualMachineImage = serde_json::from_value(body).expect("reads");
        assert_eq!(image.generation(), Some(1));
        assert_eq!(
            image.feature("AAAAAAAAAAAAAAAAAAAAA"),
            Some("aaaaaaaaaaaaaaaaaaaa")
        );
        assert_eq!(image.arm64(), None);
    }
}
