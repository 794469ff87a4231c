//! Trusted Launch as Azure applies it to REST and SDK clients, per subscription (issue 29): a
//! VM created from a Generation 2 image without a `securityProfile.securityType` gets Trusted
//! Launch with Secure Boot and vTPM on only where the subscription is registered for
//! `Microsoft.Compute/TrustedLaunchByDefaultPreview` (the portal, CLI and PowerShell do it for
//! everyone; issue 13 took that for the REST default, and the emulator learned the same wrong
//! rule). A Generation 1 image cannot have Trusted Launch, so nothing is added there.
//! `securityType: Standard` is refused unless the subscription is registered for
//! `Microsoft.Compute/UseStandardSecurityType`. What a request states is otherwise stored as
//! sent; an update keeps what the VM was created with.

use serde_json::{Map, Value, json};

use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;

/// The Hyper-V generation of the image a storage profile names, from the image table the
/// manifest reads too ([`crate::catalog::images`]): 1 when it does not know (and for a profile
/// without a marketplace image).
pub(super) fn image_generation(storage_profile: &Value) -> u8 {
    let part = |name: &str| {
        storage_profile
            .at(&format!("/imageReference/{name}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    crate::catalog::images::generation(part("publisher"), part("offer"), part("sku")).unwrap_or(1)
}

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

/// Azure's default for a new VM's properties on a subscription registered for Trusted Launch
/// by default: Trusted Launch with Secure Boot and vTPM when the request names no security type
/// and the image is Generation 2. Without that registration a REST client's VM gets none.
pub(super) fn apply_default(props: &mut Map<String, Value>, trusted_launch_by_default: bool) {
    if !trusted_launch_by_default {
        return;
    }
    let stated = props
        .get("securityProfile")
        .and_then(|p| p.get("securityType"))
        .is_some_and(|t| !t.is_null());
    let gen2 = props
        .get("storageProfile")
        .is_some_and(|s| image_generation(s) == 2);
    if stated || !gen2 {
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
        apply_default(&mut p, false);
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
            apply_default(&mut p, true);
            assert_eq!(
                p["securityProfile"],
                json!({"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": true, "vTpmEnabled": true}})
            );
        }
        // Other security settings sent without a type are kept next to the default.
        let mut p = props(&jammy, Some(json!({"encryptionAtHost": false})));
        apply_default(&mut p, true);
        assert_eq!(p["securityProfile"]["encryptionAtHost"], false);
        assert_eq!(p["securityProfile"]["securityType"], "TrustedLaunch");
        // What a request states is stored as sent.
        let off = json!({"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": false, "vTpmEnabled": true}});
        let mut p = props(&jammy, Some(off.clone()));
        apply_default(&mut p, true);
        assert_eq!(p["securityProfile"], off);
        let standard = json!({"securityType": "Standard"});
        let mut p = props(&jammy, Some(standard.clone()));
        apply_default(&mut p, true);
        assert_eq!(p["securityProfile"], standard);
        // A Generation 1 image cannot have Trusted Launch: nothing is added.
        let gen1 = json!({"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts"});
        let mut p = props(&gen1, None);
        apply_default(&mut p, true);
        assert!(p.get("securityProfile").is_none());
    }
}
