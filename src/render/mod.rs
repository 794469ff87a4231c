//! Rendering: the only code that turns results into terminal text.
//!
//! Every renderer returns a `String` (or a JSON value) and takes colour as a parameter; the CLI
//! decides colour once (on a TTY, not under NO_COLOR) and writes the text. That keeps renderers
//! pure and snapshot-testable with colour off.
//!
//! - [`plan_text`]: the plan as Terraform users know it (`+`, `~`, `-/+`, `-`), steps, cost, summary.
//! - [`plan_json`]: the plan shaped like `terraform show -json`.
//! - [`desired_dot`]: the resource graph of a manifest in DOT, for `dsinfra graph`.
//! - [`diagnostics`]: located diagnostics with coloured `error:`/`warning:` headers.
//! - [`error_text`]: an error and the causes its message does not already show.
//! - [`sizes`]: `dsinfra sizes`, the VM sizes with their facts and a region's prices.
//! - [`report`]: `dsinfra report`, benchmark results as tables, markdown and SVG charts.
//! - [`run`]: `dsinfra run`, `runs`, `logs`: node lines, per-node summaries, the runs table.
//!
//! Progress and status output of the engine (issue 4) belongs here too, as renderers of engine
//! events (`render::progress`), so that no layer below the CLI writes to the terminal.

mod diagnostics;
mod dot;
mod error;
pub mod money;
mod paint;
mod plan_json;
mod plan_text;
pub mod progress;
pub mod report;
pub mod report_chart;
pub mod run;
pub mod sizes;
pub mod status;
pub mod status_idle;
pub mod steps;
mod table;
mod value;

pub use diagnostics::diagnostics;
pub use dot::desired_dot;
pub use error::error_text;
pub use plan_json::{plan_json, plan_json_string};
pub use plan_text::plan_text;
