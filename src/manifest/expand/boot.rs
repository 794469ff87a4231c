//! What a `vm` or `cluster` boots: its image (an alias, a URN or an `image { ... }` block,
//! checked against the size's generation and GPU) and its `park { ... }` schedule and idle window.

use std::time::Duration;

use serde::Deserialize;

use crate::catalog::{GpuArch, VmSize};
use crate::diag::{Diagnostic, Span, did_you_mean};

use super::super::decode::{self, BlockAttrs, Located, Unknown};
use super::super::eval::EvalBlock;
use super::super::images::{self, ImageError, ImageRef};
use super::super::validate::time;
use super::check::Check;
use crate::model::duration;

/// An `image { ... }` block's attributes.
#[derive(Deserialize)]
struct ImageAttrs {
    publisher: Option<Located<String>>,
    offer: Option<Located<String>>,
    sku: Option<Located<String>>,
    version: Option<Located<String>>,
    generation: Option<Located<i64>>,
}

impl BlockAttrs for ImageAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[
        ("publisher", "\"Canonical\""),
        ("offer", "\"0001-com-ubuntu-server-jammy\""),
        ("sku", "\"22_04-lts-gen2\""),
    ];
}

/// A `park { ... }` block's attributes.
#[derive(Deserialize)]
struct ParkAttrs {
    at: Option<Located<String>>,
    time_zone: Option<Located<String>>,
    idle: Option<Located<String>>,
}

// `at` or `idle`, at least one: checked by `read_park`, which can say so in one message.
impl BlockAttrs for ParkAttrs {}

/// The shortest idle window. The watcher samples ten times per window (at most once a minute),
/// so under two minutes it could not tell a pause between two commands from the end of the
/// work. Two minutes is allowed, not advised: docs/park.md suggests 30m to 1h for interactive
/// work, where a short window parks a cluster between two cells of a notebook.
pub const MIN_IDLE: Duration = Duration::from_mins(2);

/// The longest idle window: a week of idling costs more than the VMs are worth parking for.
pub const MAX_IDLE: Duration = Duration::from_hours(7 * 24);

/// What a `park { ... }` block asks for: a daily schedule, an idle window, or both.
#[derive(Debug, Clone, Default)]
pub(super) struct Park {
    /// The auto-shutdown time (`HH:MM`) and Windows time zone.
    pub schedule: Option<(String, String)>,
    /// `idle`: park when idle this long, and where it is written (for later diagnostics).
    pub idle: Option<Located<Duration>>,
}

/// `image = "alias"` (or a URN), or an `image { ... }` block; `ubuntu-22.04` when neither.
pub(super) fn read_image(
    check: &mut Check<'_>,
    written: Option<Located<String>>,
    info: Option<&VmSize>,
) -> Option<ImageRef> {
    let title = check.title();
    let block = check.block();
    let (result, span, shown) = if let Some(image_block) = block.block("image") {
        if check.has("image") {
            check.report(
                Diagnostic::error(format!("{title} sets `image` twice"))
                    .with_span(image_block.header.clone())
                    .with_help("use either `image = \"alias\"` or an `image { ... }` block"),
            );
            return None;
        }
        let (image, sku) = image_from_block(check.diags_mut(), image_block)?;
        (images::check(image, info), image_block.header.clone(), sku)
    } else {
        let text = written.unwrap_or_else(|| Located {
            value: "ubuntu-22.04".to_owned(),
            span: block.header.clone(),
        });
        (images::resolve(&text.value, info), text.span, text.value)
    };
    match result {
        Ok(image) => {
            if let Some(size) = info.filter(|s| image.generation.is_none() && s.gen1 != s.gen2) {
                check.report(unknown_generation_warning(size, &shown, span.clone()));
            }
            if let Some(size) = info.filter(|s| {
                s.gpu_arch.is_some_and(GpuArch::is_nvidia) && images::lacks_gpu_driver(&image)
            }) {
                check.report(gpu_driver_warning(&title, size, &shown, span));
            }
            Some(image)
        }
        Err(ImageError::Unknown) => {
            let d = Diagnostic::error(format!("unknown image `{shown}` in {title}"))
                .with_span(span)
                .with_label("not an image alias or publisher:offer:sku:version");
            check.report(match did_you_mean(&shown, images::alias_names()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "use one of {}, a URN `publisher:offer:sku:version`, or an `image {{ ... }}` block",
                    images::alias_names().collect::<Vec<_>>().join(", ")
                )),
            });
            None
        }
        Err(ImageError::Architecture { size_arm64 }) => {
            let size = info.map_or("this size", |s| &*s.name);
            let (size_arch, image_arch) = if size_arm64 {
                ("an Arm64", "x64")
            } else {
                ("an x64", "Arm64")
            };
            check.report(
                Diagnostic::error(format!("{size} needs an image of its processor's architecture"))
                    .with_span(span)
                    .with_label(format!("{size} has {size_arch} processor; `{shown}` is an {image_arch} image"))
                    .with_help(if size_arm64 {
                        "use `ubuntu-22.04`, `ubuntu-20.04` or `ubuntu-24.04` (they pick the Arm64 image; the DSVM and HPC images have none), or an x64 size such as Standard_D4s_v5"
                    } else {
                        "use an x64 image (an alias such as `ubuntu-22.04` picks one), or an Arm64 size such as Standard_D4ps_v5"
                    }),
            );
            None
        }
        Err(ImageError::Generation { needs, image }) => {
            let size = info.map_or("this size", |s| &*s.name);
            check.report(
                Diagnostic::error(format!("{size} needs a Generation {needs} image"))
                    .with_span(span)
                    .with_label(format!("`{shown}` is a Generation {image} image"))
                    .with_help(if needs == 2 {
                        "use an alias such as `ubuntu-22.04` or `hpc-ubuntu-22.04` (it picks the generation), or a `-gen2` SKU"
                    } else {
                        "use an alias such as `ubuntu-22.04` (it picks the generation), or a Generation 1 SKU"
                    }),
            );
            None
        }
    }
}

/// An `image { publisher offer sku version generation }` block, and its SKU (for messages).
fn image_from_block(
    diags: &mut Vec<Diagnostic>,
    image_block: &EvalBlock,
) -> Option<(ImageRef, String)> {
    let attrs: ImageAttrs = decode::decode(image_block, Unknown::Checked, diags)?;
    let generation =
        Check::new(image_block, diags).in_range(attrs.generation, "generation", (1, 2), "");
    let (Some(publisher), Some(offer), Some(sku)) = (attrs.publisher, attrs.offer, attrs.sku)
    else {
        return None;
    };
    let generation = generation.map_or_else(
        || crate::catalog::images::generation(&publisher.value, &offer.value, &sku.value),
        // in_range checked the range 1..=2.
        |g| Some(if g.value == 2 { 2 } else { 1 }),
    );
    let image = ImageRef {
        publisher: publisher.value,
        offer: offer.value,
        sku: sku.value.clone(),
        version: attrs
            .version
            .map_or_else(|| "latest".to_owned(), |v| v.value),
        generation,
    };
    Some((image, sku.value))
}

/// Issue 29 item 6: an image outside the shared table whose SKU does not say its generation, on
/// a size that boots only one. Not refused: Azure knows the image, and refuses the VM at create
/// if it does not fit.
fn unknown_generation_warning(size: &VmSize, image: &str, span: Span) -> Diagnostic {
    let needs = if size.gen2_only() { 2 } else { 1 };
    Diagnostic::warning(format!(
        "the Hyper-V generation of `{image}` is not known offline"
    ))
    .with_span(span)
    .with_label(format!(
        "{} boots Generation {needs} images only; this image's SKU does not say which it is",
        size.name
    ))
    .with_help(format!(
        "if it is Generation {}, Azure refuses the VM when it is created; state it with an `image {{ publisher offer sku generation = {needs} }}` block, or use an alias such as `ubuntu-22.04`",
        3 - needs
    ))
}

/// Issue 13 item 10: a GPU size with a plain Ubuntu image boots without an NVIDIA driver, and
/// nothing said so until `nvidia-smi` failed on the node. See docs/decisions.md for why this is
/// a warning and not a driver step or the NVIDIA GPU driver VM extension.
fn gpu_driver_warning(title: &str, size: &VmSize, image: &str, span: Span) -> Diagnostic {
    let plural = if size.gpus > 1.0 { "s" } else { "" };
    Diagnostic::warning(format!(
        "{title} has {} x {} GPU{plural} but its image has no NVIDIA driver",
        size.gpus_text(),
        size.gpu_model
    ))
    .with_span(span)
    .with_label(format!(
        "`{image}` is plain Ubuntu: CUDA and nvidia-smi will find no GPU"
    ))
    .with_help(
        "use `image = \"dsvm-ubuntu-22.04\"` (Data Science VM: driver, CUDA, conda) or `image = \"hpc-ubuntu-22.04\"` (driver, CUDA, InfiniBand, MPI); both carry the driver for this GPU",
    )
}

/// A `park { at time_zone idle }` block of `owner` (`vm "gpu"`): at least one of `at` and `idle`.
pub(super) fn read_park(diags: &mut Vec<Diagnostic>, park: &EvalBlock, owner: &str) -> Park {
    let Some(attrs) = decode::decode::<ParkAttrs>(park, Unknown::Checked, diags) else {
        return Park::default();
    };
    let mut check = Check::new(park, diags);
    let idle = attrs.idle.and_then(|idle| read_idle(&mut check, idle));
    let schedule = if attrs.at.is_none() && !check.has("at") {
        if !check.has("idle") {
            check.report(
                Diagnostic::error(format!("`park` in {owner} needs `at` or `idle`"))
                    .with_span(park.header.clone())
                    .with_label("parks at neither a time nor when idle")
                    .with_help("add `at = \"19:00\"` (every evening), `idle = \"45m\"` (when nothing ran for 45 minutes), or both"),
            );
        }
        None
    } else {
        read_schedule(&mut check, attrs.at, attrs.time_zone)
    };
    Park { schedule, idle }
}

/// `idle = "45m"`: a duration from [`MIN_IDLE`] to [`MAX_IDLE`].
fn read_idle(check: &mut Check<'_>, idle: Located<String>) -> Option<Located<Duration>> {
    let report = |check: &mut Check<'_>, label: String| {
        check.report(
            Diagnostic::error("invalid idle window")
                .with_span(idle.span.clone())
                .with_label(label)
                .with_help("write how long the VMs must be idle before they are parked, from 2m to 7d, e.g. idle = \"45m\""),
        );
    };
    match duration::parse(&idle.value) {
        Err(why) => {
            report(check, why);
            None
        }
        Ok(window) if window < MIN_IDLE => {
            report(
                check,
                format!(
                    "`{}` is shorter than 2 minutes: the watcher could not tell a pause from the end of the work",
                    idle.value
                ),
            );
            None
        }
        Ok(window) if window > MAX_IDLE => {
            report(check, format!("`{}` is longer than 7 days", idle.value));
            None
        }
        Ok(window) => Some(Located {
            value: window,
            span: idle.span,
        }),
    }
}

/// `at` and `time_zone`: the daily auto-shutdown schedule.
fn read_schedule(
    check: &mut Check<'_>,
    at: Option<Located<String>>,
    zone: Option<Located<String>>,
) -> Option<(String, String)> {
    let time = at.and_then(|at| match time::parse_hhmm(&at.value) {
        Ok(t) => Some(t),
        Err(why) => {
            check.report(
                Diagnostic::error("invalid park time")
                    .with_span(at.span)
                    .with_label(why)
                    .with_help("write the time as HH:MM, e.g. at = \"19:00\""),
            );
            None
        }
    });
    let zone = match zone {
        None => Some("UTC".to_owned()),
        Some(z) => {
            if let Some(w) = time::windows_zone(&z.value) {
                Some(w.to_owned())
            } else {
                let d = Diagnostic::error(format!("unknown time zone `{}`", z.value))
                    .with_span(z.span.clone())
                    .with_label("not a Windows time zone id or a known IANA name");
                check.report(match did_you_mean(&z.value, time::zone_names()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(
                        "use e.g. \"W. Europe Standard Time\", \"Europe/Berlin\" or \"UTC\"",
                    ),
                });
                None
            }
        }
    };
    Some((time?, zone?))
}
