//! A VM's `securityProfile`: Trusted Launch, Secure Boot and vTPM, chosen once per `vm` or
//! `cluster` block and stated in every VM body (issue 13, item 13).
//!
//! Azure now creates a Generation 2 VM whose body has no `securityProfile` with Trusted Launch
//! and Secure Boot on. Secure Boot refuses locally built, unsigned kernel modules, so a block
//! whose steps build them (`mofed`, `beeond`) or whose size has InfiniBand (OFED, and on the HPC
//! images nvidia-peermem and the file-system clients) gets Trusted Launch with Secure Boot off:
//! the vTPM stays, the modules load. Every other Generation 2 block gets Trusted Launch with
//! Secure Boot and vTPM on; a Generation 1 image cannot have Trusted Launch at all (`Standard`).
//! `trusted_launch = false` and `secure_boot = true|false` override the choice.

use serde_json::{Value as Json, json};

use crate::catalog::VmSize;
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
        None => Security::trusted(true, None),
    }
}
