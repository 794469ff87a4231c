//! The plan as text, in the style Terraform users know.
//!
//! ```text
//!   # vm.gpu.vm must be replaced
//!   # (`size` cannot change in place)
//! -/+ resource "Microsoft.Compute/virtualMachines" "exp-gpu" {
//!       ~ size = "Standard_NC6s_v3" -> "Standard_NC24ads_A100_v4" # forces replacement
//!         # (6 unchanged attributes hidden)
//!     }
//! ```
//!
//! then the post-boot steps, the cost block and the summary line. Secrets are never shown: a
//! resource's secrets appear by name with the value `(sensitive)`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use console::Style;
use serde_json::Value;

use super::money::dollars;
use super::paint::{bold, dim, green, paint, red, yellow};
use super::value::{inline, key};
use crate::model::{Attrs, ResourceKind, RunPolicy, StepScope};
use crate::plan::{Action, Change, CostSummary, Mode, Plan, Rate, nodes_text};
use crate::state::PowerState;

/// Render a plan for the terminal; `colour` adds ANSI styles.
pub fn plan_text(plan: &Plan, colour: bool) -> String {
    let mut out = String::new();
    let visible: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .collect();
    if !visible.is_empty() {
        let _ = writeln!(
            out,
            "dsinfra will perform the following actions on experiment `{}`:\n",
            plan.experiment
        );
        for change in &visible {
            render_change(&mut out, change, colour);
            out.push('\n');
        }
    }
    render_steps(&mut out, plan, colour);
    render_kube(&mut out, plan, colour);
    render_cost(&mut out, &plan.cost, colour);
    for note in &plan.notes {
        let _ = writeln!(out, "{}: {note}", paint(colour, &yellow().bold(), "Note"));
    }
    if !plan.notes.is_empty() {
        out.push('\n');
    }
    out.push_str(&summary(plan, colour));
    out.push('\n');
    out
}

/// The last line: counts, or that nothing changes.
fn summary(plan: &Plan, colour: bool) -> String {
    if !plan.has_changes() {
        let text = match plan.mode {
            Mode::Normal => "No changes. Your infrastructure matches the manifest.",
            Mode::Destroy { .. } => "No changes. There is nothing to destroy.",
        };
        let mut line = paint(colour, &bold(), text);
        // Steps are no changes (as Terraform's provisioners), but "No changes" alone would hide
        // that apply still has work to do on the nodes.
        let running = plan.steps.iter().filter(|s| s.runs()).count();
        if running > 0 {
            let noun = if running == 1 { "step" } else { "steps" };
            let _ = write!(line, " Apply would still run {running} post-boot {noun}.");
        }
        return line;
    }
    let c = plan.counts();
    format!(
        "{} {} to add, {} to change, {} to replace, {} to destroy.",
        paint(colour, &bold(), "Plan:"),
        c.add,
        c.change,
        c.replace,
        c.destroy
    )
}

fn symbol(action: &Action, colour: bool) -> String {
    match action {
        Action::Create => format!("  {}", paint(colour, &green(), "+")),
        Action::Update => format!("  {}", paint(colour, &yellow(), "~")),
        Action::Delete => format!("  {}", paint(colour, &red(), "-")),
        Action::Replace { .. } => format!(
            "{}/{}",
            paint(colour, &red(), "-"),
            paint(colour, &green(), "+")
        ),
        Action::NoOp => "   ".to_owned(),
    }
}

fn headline(change: &Change) -> &'static str {
    match change.action {
        Action::Create => "will be created",
        Action::Update => "will be updated in place",
        Action::Replace { .. } => "must be replaced",
        Action::Delete => "will be destroyed",
        Action::NoOp => "is unchanged",
    }
}

fn render_change(out: &mut String, change: &Change, colour: bool) {
    let header = format!("# {} {}", change.address, headline(change));
    let _ = writeln!(out, "  {}", paint(colour, &bold(), &header));
    let mut why: Vec<String> = change.reasons.iter().map(ToString::to_string).collect();
    why.extend(idle_reason(change));
    match change.power_state {
        Some(PowerState::Deallocated) => why.push("currently parked (deallocated)".to_owned()),
        Some(PowerState::Stopped) => why.push("currently stopped (still billed)".to_owned()),
        _ => {}
    }
    if !why.is_empty() {
        let _ = writeln!(
            out,
            "  {}",
            paint(colour, &dim(), &format!("# ({})", why.join("; ")))
        );
    }
    let _ = writeln!(
        out,
        "{} resource \"{}\" \"{}\" {{",
        symbol(&change.action, colour),
        change.kind.arm_type(),
        change.name
    );
    let lines = attribute_lines(change, colour);
    for line in lines {
        out.push_str(&line);
    }
    out.push_str("    }\n");
}

/// One attribute line's pieces before alignment.
struct Line {
    sign: &'static str,
    key: String,
    value: String,
    /// Nested lines (an object diffed key by key), already indented.
    nested: Vec<String>,
}

fn sign_style(sign: &str) -> Style {
    match sign {
        "+" => green(),
        "-" => red(),
        "~" => yellow(),
        _ => Style::new(),
    }
}

/// The attribute lines of a change, `=` aligned, each ending in a newline.
fn attribute_lines(change: &Change, colour: bool) -> Vec<String> {
    let empty = Attrs::new();
    let before = change.before.as_ref().unwrap_or(&empty);
    let after = change.after.as_ref().unwrap_or(&empty);
    let forced: BTreeSet<&str> = change.forced_by().iter().map(String::as_str).collect();
    let mut lines = Vec::new();
    let mut hidden = 0usize;
    match change.action {
        // As in Terraform, unset (null) attributes of a whole resource are not listed.
        Action::Create => {
            for (k, v) in after.iter().filter(|(_, v)| !v.is_null()) {
                lines.push(whole("+", k, v, colour));
            }
            for name in &change.secrets {
                lines.push(plain("+", name, "(sensitive)"));
            }
        }
        Action::Delete => {
            for (k, v) in before.iter().filter(|(_, v)| !v.is_null()) {
                let mut line = whole("-", k, v, colour);
                if line.nested.is_empty() {
                    line.value.push_str(" -> null");
                }
                lines.push(line);
            }
        }
        _ => {
            let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
            for k in keys {
                let mut line = match (before.get(k), after.get(k)) {
                    // Unchanged, but it names a resource that is replaced: say so on its line.
                    (Some(b), Some(a)) if b == a && forced.contains(k.as_str()) => {
                        plain("~", k, &format!("{} (replaced)", inline(a)))
                    }
                    (Some(b), Some(a)) if b == a => {
                        hidden += 1;
                        continue;
                    }
                    (Some(b), Some(a)) => changed(k, b, a, colour),
                    (None, Some(a)) => whole("+", k, a, colour),
                    (Some(b), None) => plain("-", k, &format!("{} -> null", inline(b))),
                    (None, None) => continue,
                };
                if forced.contains(k.as_str()) {
                    let _ = write!(
                        line.value,
                        " {}",
                        paint(colour, &red(), "# forces replacement")
                    );
                }
                lines.push(line);
            }
            for name in &change.secrets {
                if forced.contains("expiry") {
                    let mut line = plain("~", name, "(sensitive)");
                    let _ = write!(
                        line.value,
                        " {}",
                        paint(colour, &red(), "# forces replacement")
                    );
                    lines.push(line);
                }
            }
        }
    }
    let width = lines
        .iter()
        .map(|l| l.key.chars().count())
        .max()
        .unwrap_or(0);
    let mut rendered: Vec<String> = lines
        .into_iter()
        .map(|l| {
            let mut text = format!(
                "      {} {:width$} = {}\n",
                paint(colour, &sign_style(l.sign), l.sign),
                l.key,
                l.value
            );
            for nested in l.nested {
                text.push_str(&nested);
            }
            text
        })
        .collect();
    if hidden > 0 {
        let noun = if hidden == 1 {
            "attribute"
        } else {
            "attributes"
        };
        rendered.push(format!(
            "        {}\n",
            paint(
                colour,
                &dim(),
                &format!("# ({hidden} unchanged {noun} hidden)")
            )
        ));
    }
    rendered
}

fn plain(sign: &'static str, name: &str, value: &str) -> Line {
    Line {
        sign,
        key: key(name),
        value: value.to_owned(),
        nested: Vec::new(),
    }
}

/// A VM image as the URN users write and Azure documents (`publisher:offer:sku:version`), when
/// `value` is an image reference: the plan shows which image an alias resolved to on one line.
fn image_urn(name: &str, value: &Value) -> Option<String> {
    if name != "image" {
        return None;
    }
    let map = value.as_object()?;
    let parts: Option<Vec<&str>> = ["publisher", "offer", "sku", "version"]
        .iter()
        .map(|k| map.get(*k).and_then(Value::as_str))
        .collect();
    (map.len() == 4).then_some(())?;
    Some(parts?.join(":"))
}

/// An attribute added or removed as a whole; a non-empty object is listed key by key (an image
/// reference as its URN).
fn whole(sign: &'static str, name: &str, value: &Value, colour: bool) -> Line {
    if let Some(urn) = image_urn(name, value) {
        // A removal's caller adds ` -> null` to a line without nested lines.
        return plain(sign, name, &format!("\"{urn}\""));
    }
    match value {
        Value::Object(map) if !map.is_empty() => {
            let width = map
                .keys()
                .map(|k| key(k).chars().count())
                .max()
                .unwrap_or(0);
            let mut nested: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    let suffix = if sign == "-" { " -> null" } else { "" };
                    format!(
                        "          {} {:width$} = {}{suffix}\n",
                        paint(colour, &sign_style(sign), sign),
                        key(k),
                        inline(v)
                    )
                })
                .collect();
            nested.push("        }\n".to_owned());
            Line {
                sign,
                key: key(name),
                value: "{".to_owned(),
                nested,
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            let mut nested: Vec<String> = items
                .iter()
                .map(|item| {
                    let suffix = if sign == "-" { " -> null" } else { "" };
                    format!(
                        "          {} {}{suffix},\n",
                        paint(colour, &sign_style(sign), sign),
                        inline(item)
                    )
                })
                .collect();
            nested.push("        ]\n".to_owned());
            Line {
                sign,
                key: key(name),
                value: "[".to_owned(),
                nested,
            }
        }
        other => plain(sign, name, &inline(other)),
    }
}

/// An attribute whose value changed; two objects are diffed key by key.
fn changed(name: &str, before: &Value, after: &Value, colour: bool) -> Line {
    if let (Value::Object(b), Value::Object(a)) = (before, after) {
        let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
        let width = keys
            .iter()
            .map(|k| key(k).chars().count())
            .max()
            .unwrap_or(0);
        let mut nested = Vec::new();
        let mut same = 0usize;
        for k in keys {
            let (sign, text) = match (b.get(k), a.get(k)) {
                (Some(x), Some(y)) if x == y => {
                    same += 1;
                    continue;
                }
                (Some(x), Some(y)) => ("~", format!("{} -> {}", inline(x), inline(y))),
                (None, Some(y)) => ("+", inline(y)),
                (Some(x), None) => ("-", format!("{} -> null", inline(x))),
                (None, None) => continue,
            };
            nested.push(format!(
                "          {} {:width$} = {text}\n",
                paint(colour, &sign_style(sign), sign),
                key(k)
            ));
        }
        if same > 0 {
            let noun = if same == 1 { "element" } else { "elements" };
            nested.push(format!(
                "            {}\n",
                paint(
                    colour,
                    &dim(),
                    &format!("# ({same} unchanged {noun} hidden)")
                )
            ));
        }
        nested.push("        }\n".to_owned());
        return Line {
            sign: "~",
            key: key(name),
            value: "{".to_owned(),
            nested,
        };
    }
    plain(
        "~",
        name,
        &format!("{} -> {}", inline(before), inline(after)),
    )
}

fn run_text(run: RunPolicy, scope: StepScope) -> &'static str {
    match (run, scope) {
        (RunPolicy::Once, StepScope::All) => "once",
        (RunPolicy::PerBoot, StepScope::All) => "per boot",
        (RunPolicy::Always, StepScope::All) => "always",
        (RunPolicy::Once, StepScope::Head) => "once, head",
        (RunPolicy::PerBoot, StepScope::Head) => "per boot, head",
        (RunPolicy::Always, StepScope::Head) => "always, head",
    }
}

/// The Kubernetes objects section: one line per object under its cluster, with its sign (`+`
/// created, `~` updated, `-` pruned, `=` unchanged) and what asked for it.
fn render_kube(out: &mut String, plan: &Plan, colour: bool) {
    use crate::plan::KubeAction;
    if plan.kube.is_empty() {
        return;
    }
    let changing = plan.kube.iter().filter(|k| k.changes()).count();
    let _ = writeln!(
        out,
        "{}",
        paint(
            colour,
            &bold(),
            &format!(
                "Kubernetes objects: {changing} of {} change, by server-side apply once the cluster answers (+ create, ~ update, - prune, = unchanged):",
                plan.kube.len()
            )
        )
    );
    let width = plan
        .kube
        .iter()
        .map(|k| k.id.chars().count())
        .max()
        .unwrap_or(0);
    let mut cluster = None;
    for change in &plan.kube {
        if cluster != Some(&change.cluster) {
            let _ = writeln!(out, "  {}", change.cluster);
            cluster = Some(&change.cluster);
        }
        let (sign, style) = match change.action {
            KubeAction::Create => ("+", green()),
            KubeAction::Update => ("~", yellow()),
            KubeAction::Prune => ("-", red()),
            KubeAction::Unchanged => ("=", dim()),
        };
        let _ = writeln!(
            out,
            "    {} {:width$}  {}",
            paint(colour, &style, sign),
            change.id,
            paint(colour, &dim(), &format!("from {}", change.source))
        );
    }
    out.push('\n');
}

/// The steps section: one line per step with its sign (`+` runs on some node, `=` nothing to
/// do), name, run policy and its nodes grouped by reason, one group per line, so a 64-node
/// cluster still takes one line per step and reason.
fn render_steps(out: &mut String, plan: &Plan, colour: bool) {
    if plan.steps.is_empty() {
        return;
    }
    let running = plan.steps.iter().filter(|s| s.runs()).count();
    let _ = writeln!(
        out,
        "{}",
        paint(
            colour,
            &bold(),
            &format!(
                "Post-boot steps: {running} of {} will run, in this order per block (+ runs, = up to date):",
                plan.steps.len()
            )
        )
    );
    let names: Vec<String> = plan
        .steps
        .iter()
        .map(|step| {
            if step.name == step.kind {
                step.name.clone()
            } else {
                format!("{} ({})", step.name, step.kind)
            }
        })
        .collect();
    let name_width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let run_width = plan
        .steps
        .iter()
        .map(|s| run_text(s.run, s.scope).len())
        .max()
        .unwrap_or(0);
    let mut block = None;
    for (step, name) in plan.steps.iter().zip(&names) {
        if block != Some(&step.block) {
            let _ = writeln!(out, "  {}", step.block);
            block = Some(&step.block);
        }
        let groups = step.by_reason();
        let lead = format!(
            "{name:name_width$}  {:run_width$}  ",
            run_text(step.run, step.scope)
        );
        if groups.is_empty() {
            // A plan saved before reasons existed: where, but not whether.
            let _ = writeln!(out, "      {lead}{}", step.nodes_text());
            continue;
        }
        let (sign, sign_style) = if step.runs() {
            ("+", green())
        } else {
            ("=", dim())
        };
        for (i, (reason, nodes)) in groups.iter().enumerate() {
            let text = format!("{}: {reason}", nodes_text(&step.block, nodes));
            let body = if i == 0 {
                format!("{lead}{text}")
            } else {
                format!("{:width$}{text}", "", width = lead.chars().count())
            };
            let body = if reason.runs() {
                body
            } else {
                paint(colour, &dim(), &body)
            };
            let sign = if i == 0 {
                paint(colour, &sign_style, sign)
            } else {
                " ".to_owned()
            };
            let _ = writeln!(out, "    {sign} {body}");
        }
    }
    let _ = writeln!(
        out,
        "  {}",
        paint(
            colour,
            &dim(),
            "# predicted from state; at apply each node's own markers decide (a reboot outside dsinfra is seen only then)"
        )
    );
    out.push('\n');
}

/// What each block of spot VMs saves against the same VMs at pay-as-you-go.
fn render_spot(out: &mut String, cost: &CostSummary) {
    for spot in &cost.spot {
        let plural = if spot.vms == 1 { "" } else { "s" };
        let noun = if spot.block.kind == "aml_cluster" {
            "low-priority node"
        } else {
            "spot VM"
        };
        let _ = writeln!(
            out,
            "  {}: {} {noun}{plural} at ${:.3}/h instead of ${:.3}/h on-demand: saves ${:.3}/h ({}%) while running",
            spot.block,
            spot.vms,
            spot.spot_per_hour,
            spot.on_demand_per_hour,
            spot.saves_per_hour(),
            spot.saves_percent()
        );
    }
}

fn render_cost(out: &mut String, cost: &CostSummary, colour: bool) {
    let _ = writeln!(
        out,
        "{}",
        paint(
            colour,
            &bold(),
            &format!(
                "Cost ({} Linux prices in {}, Azure's price list of {}):",
                if cost.spot.is_empty() {
                    "pay-as-you-go"
                } else {
                    "pay-as-you-go and spot"
                },
                cost.location,
                cost.price_date
            )
        )
    );
    if cost.resources.is_empty() {
        out.push_str("  nothing here is billed by the hour (storage is billed by use)\n\n");
        return;
    }
    let addr_width = cost
        .resources
        .iter()
        .map(|r| r.address.to_string().len())
        .max()
        .unwrap_or(0)
        .max("total after this plan".len());
    let what_width = cost
        .resources
        .iter()
        .map(|r| r.what.len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "    {:addr_width$}  {:what_width$}  {:>11}  {:>10}",
        "", "", "running $/h", "parked $/h"
    );
    for r in &cost.resources {
        let (sign, rate) = match (r.before, r.after) {
            (None, Some(after)) => ("+", after),
            (Some(before), None) => ("-", before),
            (Some(before), Some(after)) if before != after => ("~", after),
            (_, rate) => (" ", rate.unwrap_or_default()),
        };
        let _ = writeln!(
            out,
            "  {} {:addr_width$}  {:what_width$}  {:>11.3}  {:>10.3}",
            paint(colour, &sign_style(sign), sign),
            r.address.to_string(),
            r.what,
            rate.running_per_hour,
            rate.parked_per_hour
        );
    }
    let total = |out: &mut String, label: &str, rate: Rate| {
        let _ = writeln!(
            out,
            "    {label:addr_width$}  {:what_width$}  {:>11.3}  {:>10.3}",
            "", rate.running_per_hour, rate.parked_per_hour
        );
    };
    total(
        out,
        "total now",
        Rate {
            running_per_hour: cost.before.running_per_hour,
            parked_per_hour: cost.before.parked_per_hour,
        },
    );
    total(
        out,
        "total after this plan",
        Rate {
            running_per_hour: cost.after.running_per_hour,
            parked_per_hour: cost.after.parked_per_hour,
        },
    );
    let _ = writeln!(
        out,
        "  30 days ({} h) after this plan: {} running, {} parked (VM compute is billed only while running)",
        cost.hours_per_month,
        dollars(cost.after.running_per_month),
        dollars(cost.after.parked_per_month)
    );
    render_spot(out, cost);
    for idle in &cost.idle {
        let plural = if idle.vms == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "  {}: idle for {} parks {} VM{plural}: saves ${:.3}/h while parked",
            idle.block,
            window_text(idle.window_s),
            idle.vms,
            idle.saves_per_hour
        );
    }
    out.push('\n');
}

/// An idle window as the manifest writes one: `45m`, `1h30m`, `2d`.
fn window_text(seconds: u64) -> String {
    let mut text = String::new();
    let mut rest = seconds;
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if rest >= size {
            let _ = write!(text, "{}{unit}", rest / size);
            rest %= size;
        }
    }
    if text.is_empty() {
        "0s".to_owned()
    } else {
        text
    }
}

/// Why a change exists when it is idle auto-park's (issue 18): the head's identity, the idle
/// role and its assignment.
fn idle_reason(change: &Change) -> Option<String> {
    const WHY: &str = "lets the head deallocate this experiment's VMs when idle";
    let after = change.after.as_ref()?;
    match change.kind {
        ResourceKind::RoleDefinition => Some(format!(
            "{WHY}: read, deallocate and start VMs, in this resource group only"
        )),
        ResourceKind::RoleAssignment => Some(format!(
            "{WHY}: the idle role, to the head's system-assigned identity"
        )),
        ResourceKind::VirtualMachine
            if after.contains_key("identity")
                && change
                    .before
                    .as_ref()
                    .is_none_or(|b| b.get("identity") != after.get("identity")) =>
        {
            Some(format!("system-assigned identity: {WHY}"))
        }
        _ => None,
    }
}
