//! `dsinfra report`: the fetched benchmark results of one manifest (or two, side by side) as a
//! table on the terminal and as `report.md` and SVG charts under `.dsinfra/<manifest>/reports/`.

use super::terminal::{ProgressOn, Terminal};
use super::{Outcome, Output};
use crate::args::ReportArgs;
use crate::engine::op::{self, Cancel, Events};
use crate::render::report::{report_documents, report_text};

/// `dsinfra report`
pub async fn report(args: &ReportArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let events: Events = Terminal::new(out, ProgressOn::Stderr);
    let request = op::ReportRequest {
        manifests: &args.manifests,
    };
    let found = op::report(request, &events, &cancel).await?;
    out.result(&report_text(&found.experiments));
    for path in op::report::save(&found.dir, &report_documents(&found.experiments))? {
        out.note(&format!("wrote {}", path.display()));
    }
    Ok(Outcome::Success)
}
