//! A VM's `securityProfile`: Trusted Launch, Secure Boot and vTPM, chosen once per `vm` or
//! `cluster` block (issue 13, item 13; issue 29, items 4 and 5).
//!
//! A block without Trusted Launch (`Standard` here) sends no `securityProfile` at all: the
//! `Standard` security type is accepted from REST clients only on subscriptions registered for
//! `Microsoft.Compute/UseStandardSecurityType` (Trusted Launch FAQ), and without a profile a REST
//! client gets a VM without Trusted Launch unless the subscription is registered for
//! `TrustedLaunchByDefaultPreview` (issue 29; docs/decisions.md 59).
//!
//! A size with an NVIDIA GPU gets Secure Boot off: the drivers of the images dsinfra names (the
//! HPC images build them with DKMS, azhpc-images) are not signed by a key the VM trusts, and
//! Microsoft's N-series driver page says third-party drivers under Secure Boot need an enrolled
//! Machine Owner Key; `nvidia-smi` would find no driver.
//!
//! Secure Boot refuses locally built, unsigned kernel modules, so a block whose steps build them
//! (`mofed`, `beeond`) or whose size has InfiniBand (OFED, and on the HPC images nvidia-peermem
//! and the file-system clients) gets Trusted Launch with Secure Boot off: the vTPM stays, the
//! modules load. Every other Generation 2 block gets Trusted Launch with Secure Boot and vTPM on;
//! a Generation 1 image cannot have Trusted Launch at all (`Standard`). `trusted_launch = false`
//! and `secure_boot = true|false` override the choice.

use serde_json::{Value as Json, json};

use crate::catalog::{GpuArch, VmSize};
use crate::diag::Diagnostic;
use crate::model::KERNEL_MODULE_STEPS;

use super::super::decode::Located;
use super::super::images::ImageRef;
use super::check::Check;

/// The security settings of a block's VMs, and why they were chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Security {
    /// Trusted Launch (`TrustedLaunch`) or none (`Standard`).
    pub trusted_launch: bool,
    /// Secure Boot (only with Trusted Launch).
    pub secure_boot: bool,
    /// The virtual TPM (only with Trusted Launch).
    pub vtpm: bool,
    /// For the plan's note when the choice is not Azure's default; `None` when it is.
    pub why: Option<String>,
}

impl Security {
    /// The VM's `security` attribute: what the body sends, in the plan's words.
    pub fn to_json(&self) -> Json {
        json!({
            "type": if self.trusted_launch { "TrustedLaunch" } else { "Standard" },
            "secure_boot": self.secure_boot,
            "vtpm": self.vtpm,
        })
    }

    fn standard(why: String) -> Self {
        Self {
            trusted_launch: false,
            secure_boot: false,
            vtpm: false,
            why: Some(why),
        }
    }

    fn trusted(secure_boot: bool, why: Option<String>) -> Self {
        Self {
            trusted_launch: true,
            secure_boot,
            vtpm: true,
            why,
        }
    }
}

/// Choose the block's security settings from its image, size and steps and the manifest's
/// `trusted_launch` / `secure_boot` (as `asked`), reporting contradictions at the attribute.
pub(super) fn choose(
    check: &mut Check<'_>,
    asked: (Option<Located<bool>>, Option<Located<bool>>),
    image: Option<&ImageRef>,
    size: Option<&VmSize>,
) -> Security {
    let title = check.title();
    let (trusted_launch, secure_boot) = asked;
    let module_steps: Vec<String> = check
        .block()
        .blocks_of("step")
        .map(|s| s.label().to_owned())
        .filter(|kind| KERNEL_MODULE_STEPS.contains(&kind.as_str()))
        .collect();
    let infiniband = size.is_some_and(|s| s.infiniband);
    let nvidia = size
        .and_then(|s| s.gpu_arch)
        .is_some_and(GpuArch::is_nvidia);

    // Not known offline: the size's own rule says what it must be.
    let gen1 = image.is_some_and(|i| {
        i.generation == Some(1) || (i.generation.is_none() && size.is_some_and(VmSize::gen1_only))
    });
    if gen1 {
        for asked in [&trusted_launch, &secure_boot]
            .into_iter()
            .flatten()
            .filter(|a| a.value)
        {
            check.report(
                Diagnostic::error(format!("{title} cannot use Trusted Launch"))
                    .with_span(asked.span.clone())
                    .with_label("its image is Generation 1; Trusted Launch and Secure Boot need Generation 2")
                    .with_help("use a size that takes Generation 2 images (the image aliases then pick one), or remove this line"),
            );
        }
        return Security::standard(
            "no Trusted Launch: its image is Generation 1, which cannot have it".to_owned(),
        );
    }
    if trusted_launch.as_ref().is_some_and(|t| !t.value) {
        if let Some(sb) = secure_boot.as_ref().filter(|s| s.value) {
            check.report(
                Diagnostic::error(format!(
                    "{title} asks for Secure Boot without Trusted Launch"
                ))
                .with_span(sb.span.clone())
                .with_label("Secure Boot is part of Trusted Launch")
                .with_help("remove `secure_boot = true`, or `trusted_launch = false`"),
            );
        }
        return Security::standard(
            "no Trusted Launch (no Secure Boot, no vTPM): `trusted_launch = false` in the manifest"
                .to_owned(),
        );
    }
    if let Some(sb) = secure_boot {
        if sb.value && nvidia && module_steps.is_empty() {
            check.report(
                Diagnostic::warning(format!("Secure Boot on {title}, whose NVIDIA driver is unsigned"))
                    .with_span(sb.span.clone())
                    .with_label("the image's NVIDIA kernel modules are built on the VM (DKMS) and signed by no key it trusts")
                    .with_help("remove `secure_boot = true` (dsinfra then turns Secure Boot off for this block), or enroll a Machine Owner Key for the driver yourself"),
            );
        }
        if sb.value && !module_steps.is_empty() {
            let steps = match module_steps.as_slice() {
                [one] => format!("{one} step builds"),
                many => format!("{} steps build", many.join(" and ")),
            };
            check.report(
                Diagnostic::warning(format!("Secure Boot on {title}, whose {steps} kernel modules"))
                .with_span(sb.span.clone())
                .with_label("Secure Boot refuses to load locally built, unsigned modules")
                .with_help("remove `secure_boot = true` (dsinfra then turns Secure Boot off for this block); with it, those steps refuse to start"),
            );
        }
        let why = (!sb.value).then(|| {
            "Trusted Launch with Secure Boot off: `secure_boot = false` in the manifest".to_owned()
        });
        return Security::trusted(sb.value, why);
    }
    let builders = match module_steps.as_slice() {
        [] if infiniband => Some("its InfiniBand drivers build".to_owned()),
        [] => None,
        [one] => Some(format!("its {one} step builds")),
        many => Some(format!("its {} steps build", many.join(" and "))),
    };
    match builders {
        Some(builders) => Security::trusted(
            false,
            Some(format!(
                "Trusted Launch with Secure Boot off: {builders} kernel modules, which Secure Boot would refuse to load (`secure_boot = true` keeps it on; the kernel-module steps then refuse to start)"
            )),
        ),
        None if nvidia => Security::trusted(
            false,
            Some(
                "Trusted Launch with Secure Boot off: its image's NVIDIA driver is built on the VM and signed by no key the VM trusts, so Secure Boot would stop it from loading (`secure_boot = true` keeps Secure Boot on: then enroll a key for the driver yourself)"
                    .to_owned(),
            ),
        ),
        None => Security::trusted(true, None),
    }
}
