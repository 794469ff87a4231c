//! A VM's `securityProfile`: Trusted Launch, Secure Boot and vTPM, chosen once per `vm` or
//! `cluster` block from Azure's data (issue 13, item 13; issue 29; docs/decisions.md 59 and 61).
//!
//! Trusted Launch is stated only where the size accepts it (the catalog's `trusted_launch`, from
//! Resource SKUs' `TrustedLaunchDisabled`) and the image advertises it (the image table, from
//! VirtualMachineImages_Get's `SecurityType` feature). Where either is not known offline, the
//! block gets no `securityProfile` for now and remembers the Secure Boot it would get
//! (`if_supported`): the connected plan reads the size's Resource SKU and the image's features
//! and states Trusted Launch where both allow it (engine::preflight::security).
//!
//! A block without Trusted Launch sends no `securityProfile` at all: the `Standard` security
//! type is accepted from REST clients only on subscriptions registered for
//! `Microsoft.Compute/UseStandardSecurityType` (Trusted Launch FAQ), and without a profile a REST
//! client gets a VM without Trusted Launch unless the subscription is registered for
//! `TrustedLaunchByDefaultPreview`, which the connected plan also reads.
//!
//! A size with an NVIDIA GPU gets Secure Boot off: the drivers of the images dsinfra names (the
//! HPC images build them with DKMS, azhpc-images) are not signed by a key the VM trusts, and
//! Microsoft's N-series driver page says third-party drivers under Secure Boot need an enrolled
//! Machine Owner Key; `nvidia-smi` would find no driver. Secure Boot also refuses locally built,
//! unsigned kernel modules, so a block whose steps build them (`mofed`, `beeond`) or whose size
//! has InfiniBand (OFED, and on the HPC images nvidia-peermem and the file-system clients) gets
//! Secure Boot off: the vTPM stays, the modules load. `trusted_launch = false` and
//! `secure_boot = true|false` override the choice.

use serde_json::{Value as Json, json};

use crate::catalog::{GpuArch, VmSize, images as known_images};
use crate::diag::{Diagnostic, Span};
use crate::model::{KERNEL_MODULE_STEPS, SECURITY_WHERE_SUPPORTED};

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
    /// No Trusted Launch because the manifest says `trusted_launch = false` (not because the
    /// size or image cannot have it): on a subscription that gives Trusted Launch by default,
    /// only an explicit `Standard` keeps it off.
    pub asked_standard: bool,
    /// Not decided offline: the Secure Boot the block gets with Trusted Launch if the connected
    /// plan finds the size and the image support it.
    pub if_supported: Option<bool>,
    /// For the plan's note when the choice is not Azure's default; `None` when it is.
    pub why: Option<String>,
    /// Where the manifest states `trusted_launch` or `secure_boot`, if it does.
    pub asked_at: Option<Span>,
}

impl Security {
    /// The VM's `security` attribute: what the body sends, in the plan's words.
    pub fn to_json(&self) -> Json {
        let mut json = json!({
            "type": if self.trusted_launch { "TrustedLaunch" } else { "Standard" },
            "secure_boot": self.secure_boot,
            // The vTPM comes with Trusted Launch, always on.
            "vtpm": self.trusted_launch,
        });
        if self.asked_standard {
            json["asked"] = json!(true);
        }
        if let Some(secure_boot) = self.if_supported {
            json["if_supported"] = json!({"secure_boot": secure_boot});
        }
        json
    }

    fn standard(why: String) -> Self {
        Self {
            trusted_launch: false,
            secure_boot: false,
            asked_standard: false,
            if_supported: None,
            why: Some(why),
            asked_at: None,
        }
    }

    fn trusted(secure_boot: bool, why: Option<String>) -> Self {
        Self {
            trusted_launch: true,
            secure_boot,
            asked_standard: false,
            if_supported: None,
            why,
            asked_at: None,
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
    let asked_at = asked
        .0
        .as_ref()
        .or(asked.1.as_ref())
        .map(|a| a.span.clone());
    Security {
        asked_at,
        ..decide(check, asked, image, size)
    }
}

fn decide(
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

    let image_support =
        image.and_then(|i| known_images::trusted_launch(&i.publisher, &i.offer, &i.sku));
    if let Some(standard) = unsupported(
        check,
        (&trusted_launch, &secure_boot),
        image.map(|i| (i, image_support)),
        size,
    ) {
        return standard;
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
        return Security {
            asked_standard: true,
            ..Security::standard(
                "no Trusted Launch (no Secure Boot, no vTPM): `trusted_launch = false` in the manifest"
                    .to_owned(),
            )
        };
    }
    if let Some(sb) = secure_boot {
        // Asked for in the manifest: stated, and checked against Azure when connected.
        return asked_secure_boot(check, &sb, nvidia, &module_steps);
    }
    let builders = match module_steps.as_slice() {
        [] if infiniband => Some("its InfiniBand drivers build".to_owned()),
        [] => None,
        [one] => Some(format!("its {one} step builds")),
        many => Some(format!("its {} steps build", many.join(" and "))),
    };
    let wanted = match builders {
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
    };
    let size_support = size.and_then(|s| s.trusted_launch);
    if trusted_launch.is_some_and(|t| t.value)
        || (size_support == Some(true) && image_support == Some(true))
    {
        return wanted;
    }
    // Not known offline whether Azure accepts it: no profile for now (never refused), and the
    // connected plan states what `wanted` says where the size and the image support it.
    let unknown = match (size_support, image_support) {
        (Some(_), _) => format!("image {}", image.map_or_else(String::new, ImageRef::urn)),
        (None, Some(_)) => size.map_or_else(|| "its size".to_owned(), |s| s.name.to_string()),
        (None, None) => format!(
            "{} and image {}",
            size.map_or("its size", |s| &*s.name),
            image.map_or_else(String::new, ImageRef::urn)
        ),
    };
    let reason = wanted
        .why
        .unwrap_or_else(|| "Trusted Launch with Secure Boot and vTPM".to_owned());
    Security {
        if_supported: Some(wanted.secure_boot),
        ..Security::standard(format!(
            "no securityProfile offline: whether {unknown} supports Trusted Launch is not known here, and a connected plan reads it from Azure. {SECURITY_WHERE_SUPPORTED}{reason}"
        ))
    }
}

/// `secure_boot = true|false` in the manifest: Trusted Launch with it, warning where Secure Boot
/// would stop the block's NVIDIA driver or kernel-module steps.
fn asked_secure_boot(
    check: &mut Check<'_>,
    sb: &Located<bool>,
    nvidia: bool,
    module_steps: &[String],
) -> Security {
    let title = check.title();
    if sb.value && nvidia && module_steps.is_empty() {
        check.report(
            Diagnostic::warning(format!("Secure Boot on {title}, whose NVIDIA driver is unsigned"))
                .with_span(sb.span.clone())
                .with_label("the image's NVIDIA kernel modules are built on the VM (DKMS) and signed by no key it trusts")
                .with_help("remove `secure_boot = true` (dsinfra then turns Secure Boot off for this block), or enroll a Machine Owner Key for the driver yourself"),
        );
    }
    if sb.value && !module_steps.is_empty() {
        let steps = match module_steps {
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
    Security::trusted(sb.value, why)
}

/// `Standard` with the reason, where Trusted Launch is known to be impossible offline: a
/// Generation 1 image, a size Resource SKUs mark `TrustedLaunchDisabled`, an image the table
/// knows lacks it (`image`, with its support as far as known). Asking for it there (`asked`) is
/// an error at the attribute.
fn unsupported(
    check: &mut Check<'_>,
    asked: (&Option<Located<bool>>, &Option<Located<bool>>),
    image: Option<(&ImageRef, Option<bool>)>,
    size: Option<&VmSize>,
) -> Option<Security> {
    let title = check.title();
    let (trusted_launch, secure_boot) = asked;
    let refuse = |check: &mut Check<'_>, label: String, help: &str| {
        for asked in [trusted_launch, secure_boot]
            .into_iter()
            .flatten()
            .filter(|a| a.value)
        {
            check.report(
                Diagnostic::error(format!("{title} cannot use Trusted Launch"))
                    .with_span(asked.span.clone())
                    .with_label(label.clone())
                    .with_help(help.to_owned()),
            );
        }
    };

    // Not known offline: the size's own rule says what it must be.
    let gen1 = image.is_some_and(|(i, _)| {
        i.generation == Some(1) || (i.generation.is_none() && size.is_some_and(VmSize::gen1_only))
    });
    if gen1 {
        refuse(
            check,
            "its image is Generation 1; Trusted Launch and Secure Boot need Generation 2".into(),
            "use a size that takes Generation 2 images (the image aliases then pick one), or remove this line",
        );
        return Some(Security::standard(
            "no Trusted Launch: its image is Generation 1, which cannot have it".to_owned(),
        ));
    }
    if let Some(size) = size.filter(|s| s.trusted_launch == Some(false)) {
        refuse(
            check,
            format!(
                "Azure refuses Trusted Launch on {} (Resource SKUs: TrustedLaunchDisabled)",
                size.name
            ),
            "remove this line, or pick a size that supports Trusted Launch",
        );
        return Some(Security::standard(format!(
            "no Trusted Launch: {} does not support it (Resource SKUs: TrustedLaunchDisabled)",
            size.name
        )));
    }
    if let Some((image, _)) = image.filter(|(_, support)| *support == Some(false)) {
        refuse(
            check,
            format!(
                "image {} does not advertise Trusted Launch support",
                image.urn()
            ),
            "remove this line, or use an image that supports Trusted Launch (the ubuntu-* aliases do)",
        );
        return Some(Security::standard(format!(
            "no Trusted Launch: image {} does not support it",
            image.urn()
        )));
    }
    None
}
