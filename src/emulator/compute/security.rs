//! Trusted Launch as Azure applies it to REST and SDK clients, per subscription, size and image
//! (issue 29): a VM created without a `securityProfile.securityType` gets Trusted Launch with
//! Secure Boot and vTPM on only where the subscription is registered for
//! `Microsoft.Compute/TrustedLaunchByDefaultPreview` (the portal, CLI and PowerShell do it for
//! everyone; issue 13 took that for the REST default, and the emulator learned the same wrong
//! rule), and only where the size and the image support it. A body that states Trusted Launch
//! is refused on a size Resource SKUs mark `TrustedLaunchDisabled` and on an image whose
//! `features` do not advertise it (compute/images.rs); an x64 image on an Arm64 size (or the
//! reverse) is refused too. `securityType: Standard` is refused unless the subscription is
//! registered for `Microsoft.Compute/UseStandardSecurityType`. What a request states is
//! otherwise stored as sent; an update keeps what the VM was created with.
//!
//! ARM's codes and wording for the size and image refusals are those issue 29 quotes from real
//! answers (`BadRequest`); the architecture refusal's wording was not captured (decision 61).

use serde_json::{Map, Value, json};

use crate::emulator::config::{EmulatorConfig, VmSizeSpec};
use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;

use super::images;

/// ARM refuses `securityType: Standard` from a subscription not registered for
/// `UseStandardSecurityType` (Trusted Launch FAQ). ARM's exact wording was not captured here;
/// the code is the one ARM gives an invalid VM parameter, with the property as its target.
pub(super) fn check_security_type(props: &Value, standard_allowed: bool) -> Result<(), ArmError> {
    let stated = props
        .at("/securityProfile/securityType")
        .and_then(Value::as_str);
    if stated.is_some_and(|t| t.eq_ignore_ascii_case("Standard")) && !standard_allowed {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            "The value 'Standard' of parameter 'securityProfile.securityType' needs the \
             subscription to be registered for the feature \
             'Microsoft.Compute/UseStandardSecurityType'; leave securityProfile out instead.",
        )
        .with_target("securityProfile.securityType"));
    }
    Ok(())
}

/// ARM's refusals of a VM body for its size and image: Trusted Launch stated where the size or
/// the image does not support it, and an image of the other CPU architecture.
pub(super) fn check_size_and_image(
    config: &EmulatorConfig,
    props: &Value,
    size: &VmSizeSpec,
) -> Result<(), ArmError> {
    let Some(profile) = props.get("storageProfile") else {
        return Ok(());
    };
    let Some(image) = images::of_profile(config, profile) else {
        return Ok(());
    };
    if image.arm64 != size.arm64 {
        let (size_arch, image_arch) = if size.arm64 {
            ("Arm64", "x64")
        } else {
            ("x64", "Arm64")
        };
        return Err(ArmError::new(
            400,
            "BadRequest",
            format!(
                "The VM size '{}' is not supported with an image of architecture '{image_arch}': \
                 the size's architecture is '{size_arch}'. Use an image of the size's \
                 architecture.",
                size.name
            ),
        ));
    }
    let stated = props
        .at("/securityProfile/securityType")
        .and_then(Value::as_str);
    if !stated.is_some_and(|t| t.eq_ignore_ascii_case("TrustedLaunch")) {
        return Ok(());
    }
    if size.trusted_launch == Some(false) {
        return Err(ArmError::new(
            400,
            "BadRequest",
            format!(
                "The VM size '{}' is not supported for creation of VMs and Virtual Machine Scale \
                 Set with 'TrustedLaunch' security type.",
                size.name
            ),
        ));
    }
    if !image.trusted_launch {
        return Err(ArmError::new(
            400,
            "BadRequest",
            "Use of TrustedLaunch setting is not supported for the provided image. Please select \
             Trusted Launch Supported Gen2 OS Image. For more information, see \
             https://aka.ms/TrustedLaunch-FAQ.",
        ));
    }
    Ok(())
}

/// Azure's default for a new VM's properties on a subscription registered for Trusted Launch
/// by default: Trusted Launch with Secure Boot and vTPM when the request names no security type
/// and the size and the image support it. Without that registration a REST
/// client's VM gets none.
pub(super) fn apply_default(
    config: &EmulatorConfig,
    props: &mut Map<String, Value>,
    trusted_launch_by_default: bool,
    size: &VmSizeSpec,
) {
    if !trusted_launch_by_default || size.trusted_launch == Some(false) {
        return;
    }
    let stated = props
        .get("securityProfile")
        .and_then(|p| p.get("securityType"))
        .is_some_and(|t| !t.is_null());
    let supported = props
        .get("storageProfile")
        .and_then(|s| images::of_profile(config, s))
        .is_some_and(|i| i.trusted_launch);
    if stated || !supported {
        return;
    }
    let profile = props.entry("securityProfile").or_insert_with(|| json!({}));
    if !profile.is_object() {
        *profile = json!({});
    }
    profile["securityType"] = json!("TrustedLaunch");
    profile["uefiSettings"] = json!({"secureBootEnabled": true, "vTpmEnabled": true});
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any_size() -> VmSizeSpec {
        VmSizeSpec::new("Standard_D4s_v5", 4, "standardDSv5Family")
    }

    fn props(image: &Value, security: Option<Value>) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("storageProfile".into(), json!({"imageReference": image}));
        if let Some(security) = security {
            props.insert("securityProfile".into(), security);
        }
        props
    }

    /// Issue 29 item 1: without the preview feature, a REST client's VM gets no Trusted Launch.
    #[test]
    fn without_trusted_launch_by_default_nothing_is_added() {
        let jammy = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2"});
        let mut p = props(&jammy, None);
        apply_default(&EmulatorConfig::default(), &mut p, false, &any_size());
        assert!(p.get("securityProfile").is_none());
    }

    /// Issue 29 item 5: `Standard` only with `UseStandardSecurityType`.
    #[test]
    fn standard_is_refused_without_its_feature() {
        let standard = json!({"securityProfile": {"securityType": "Standard"}});
        let refused = check_security_type(&standard, false).expect_err("refused");
        assert_eq!(refused.body()["error"]["code"], "InvalidParameter");
        assert_eq!(
            refused.body()["error"]["target"],
            "securityProfile.securityType"
        );
        assert!(check_security_type(&standard, true).is_ok());
        let trusted = json!({"securityProfile": {"securityType": "TrustedLaunch"}});
        assert!(check_security_type(&trusted, false).is_ok());
        assert!(check_security_type(&json!({}), false).is_ok());
    }

    /// Issue 13 item 13, on a subscription registered for Trusted Launch by default.
    #[test]
    fn a_gen2_vm_without_a_security_type_gets_trusted_launch_with_secure_boot() {
        let jammy = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2"});
        let hpc = json!({"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204-v100"});
        for image in [jammy.clone(), hpc] {
            let mut p = props(&image, None);
            apply_default(&EmulatorConfig::default(), &mut p, true, &any_size());
            assert_eq!(
                p["securityProfile"],
                json!({"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": true, "vTpmEnabled": true}})
            );
        }
        // Other security settings sent without a type are kept next to the default.
        let mut p = props(&jammy, Some(json!({"encryptionAtHost": false})));
        apply_default(&EmulatorConfig::default(), &mut p, true, &any_size());
        assert_eq!(p["securityProfile"]["encryptionAtHost"], false);
        assert_eq!(p["securityProfile"]["securityType"], "TrustedLaunch");
        // What a request states is stored as sent.
        let off = json!({"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": false, "vTpmEnabled": true}});
        let mut p = props(&jammy, Some(off.clone()));
        apply_default(&EmulatorConfig::default(), &mut p, true, &any_size());
        assert_eq!(p["securityProfile"], off);
        let standard = json!({"securityType": "Standard"});
        let mut p = props(&jammy, Some(standard.clone()));
        apply_default(&EmulatorConfig::default(), &mut p, true, &any_size());
        assert_eq!(p["securityProfile"], standard);
        // A Generation 1 image cannot have Trusted Launch: nothing is added.
        let gen1 = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts"});
        let mut p = props(&gen1, None);
        apply_default(&EmulatorConfig::default(), &mut p, true, &any_size());
        assert!(p.get("securityProfile").is_none());
    }

    /// Issue 29 items 2, 3 and 10: ARM refuses Trusted Launch on a `TrustedLaunchDisabled` size
    /// and on an image without the feature, and an image of the other architecture.
    #[test]
    fn trusted_launch_and_architecture_are_checked_against_the_size_and_the_image() {
        let config = EmulatorConfig {
            no_trusted_launch_images: vec!["someone:plain:v1-gen2".into()],
            ..EmulatorConfig::default()
        };
        let body = |image: Value, security: &str| {
            json!({"storageProfile": {"imageReference": image},
                   "securityProfile": {"securityType": security}})
        };
        let jammy = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2"});
        let plain = json!({"publisher": "someone", "offer": "plain", "sku": "v1-gen2"});
        let mut a100 = VmSizeSpec::new("Standard_ND96asr_v4", 96, "f");
        a100.trusted_launch = Some(false);
        let nd40 = VmSizeSpec::new("Standard_ND40rs_v2", 40, "f");
        let refused = check_size_and_image(&config, &body(jammy.clone(), "TrustedLaunch"), &a100)
            .expect_err("size refuses");
        assert_eq!(refused.body()["error"]["code"], "BadRequest");
        assert!(
            refused.body()["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("'Standard_ND96asr_v4' is not supported for creation of VMs"),
            "{:?}",
            refused.body()
        );
        assert!(
            check_size_and_image(&config, &body(jammy.clone(), "TrustedLaunch"), &nd40).is_ok()
        );
        let refused = check_size_and_image(&config, &body(plain.clone(), "TrustedLaunch"), &nd40)
            .expect_err("image refuses");
        assert!(
            refused.body()["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(
                    "Use of TrustedLaunch setting is not supported for the provided image"
                )
        );
        // Without a stated security type nothing is refused for it.
        assert!(
            check_size_and_image(
                &config,
                &json!({"storageProfile": {"imageReference": plain}}),
                &a100
            )
            .is_ok()
        );
        // An x64 image on an Arm64 size.
        let mut arm = VmSizeSpec::new("Standard_D4ps_v5", 4, "f");
        arm.arm64 = true;
        let refused = check_size_and_image(&config, &body(jammy, "Standard"), &arm)
            .expect_err("architecture");
        assert_eq!(refused.body()["error"]["code"], "BadRequest");
        let arm_image = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-arm64"});
        assert!(
            check_size_and_image(
                &config,
                &json!({"storageProfile": {"imageReference": arm_image}}),
                &arm
            )
            .is_ok()
        );
    }

    /// On a Trusted-Launch-by-default subscription, Azure adds it only where size and image allow.
    #[test]
    fn the_default_is_applied_only_where_the_size_and_the_image_allow_it() {
        let config = EmulatorConfig {
            no_trusted_launch_images: vec!["someone:plain:v1-gen2".into()],
            ..EmulatorConfig::default()
        };
        let jammy = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2"});
        let mut refusing = any_size();
        refusing.trusted_launch = Some(false);
        let mut p = props(&jammy, None);
        apply_default(&config, &mut p, true, &refusing);
        assert!(p.get("securityProfile").is_none(), "the size refuses it");
        let plain = json!({"publisher": "someone", "offer": "plain", "sku": "v1-gen2"});
        let mut p = props(&plain, None);
        apply_default(&config, &mut p, true, &any_size());
        assert!(p.get("securityProfile").is_none(), "the image lacks it");
    }
}
