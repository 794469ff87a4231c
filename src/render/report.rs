//! `dsinfra report`: the benchmark results as a terminal table and as a markdown document
//! (what produced each results file, the table, the charts), plus the SVG charts of
//! [`super::report_chart`]. Two manifests' results go side by side: one table with an
//! `experiment` column, and the same charts with each series named after its manifest.

use std::fmt::Write as _;

use super::report_chart::{self, Chart};
use super::table::{Align, aligned};
use crate::engine::op::report::Experiment;
use crate::steps::results::{Results, Row, format_size};

/// The report's markdown file name (in `.dsinfra/<manifest>/reports/`).
pub const MARKDOWN: &str = "report.md";

/// Every row of every experiment, with what names it in a table.
fn rows(experiments: &[Experiment]) -> Vec<(&str, &Results, &Row)> {
    experiments
        .iter()
        .flat_map(|e| {
            e.results
                .iter()
                .flat_map(move |r| r.rows.iter().map(move |row| (e.label.as_str(), r, row)))
        })
        .collect()
}

/// How the cache state of a row reads.
fn caches(row: &Row) -> &'static str {
    match row.caches_dropped {
        Some(true) => "dropped",
        Some(false) => "NOT dropped",
        None => "-",
    }
}

/// The table's cells: a header, then one line per row.
fn cells(experiments: &[Experiment]) -> Vec<Vec<String>> {
    let side_by_side = experiments.len() > 1;
    let mut header: Vec<String> = [
        "step",
        "operation",
        "path",
        "threads",
        "block",
        "file size",
        "files",
        "nodes",
        "MiB/s",
        "IOPS",
        "latency us",
        "caches",
    ]
    .map(str::to_owned)
    .to_vec();
    if side_by_side {
        header.insert(0, "experiment".into());
    }
    let mut out = vec![header];
    for (label, results, row) in rows(experiments) {
        let mut line = vec![
            results.provenance.step.clone(),
            row.operation.clone(),
            row.path.clone(),
            row.threads.to_string(),
            format_size(row.block_size),
            format_size(row.file_size),
            row.files.to_string(),
            row.nodes.to_string(),
            format!("{:.1}", row.mib_per_s),
            format!("{:.0}", row.iops),
            row.latency_us
                .map_or_else(|| "-".into(), |l| format!("{l:.1}")),
            caches(row).to_owned(),
        ];
        if side_by_side {
            line.insert(0, label.to_owned());
        }
        out.push(line);
    }
    out
}

/// The terminal table.
pub fn report_text(experiments: &[Experiment]) -> String {
    let cells = cells(experiments);
    let offset = usize::from(experiments.len() > 1);
    let mut align = vec![Align::Left; 3 + offset];
    align.extend([Align::Right; 8]);
    let mut out = aligned(&cells, &align);
    for warning in cache_warnings(experiments) {
        let _ = writeln!(out, "note: {warning}");
    }
    out
}

/// One sentence per cold pass whose caches could not be dropped.
fn cache_warnings(experiments: &[Experiment]) -> Vec<String> {
    rows(experiments)
        .into_iter()
        .filter(|(_, _, row)| row.caches_dropped == Some(false))
        .map(|(label, results, row)| {
            format!(
                "{label}, step `{}`: the page cache was not dropped before the {} pass on {} \
                 (`drop_caches = false`, no root, or a container that forbids it), so that pass \
                 may have read from memory",
                results.provenance.step, row.operation, row.path
            )
        })
        .collect()
}

/// The markdown document: provenance per results file, the table, notes, the charts.
pub fn report_markdown(experiments: &[Experiment], charts: &[Chart]) -> String {
    let mut out = String::from("# Benchmark report\n\n");
    for experiment in experiments {
        for results in &experiment.results {
            let p = &results.provenance;
            let params = serde_json::to_string(&p.params).unwrap_or_default();
            let _ = writeln!(
                out,
                "- **{}** `{}` step `{}` ({}) on {}: {} node(s) of {}, image {}; dsinfra {}, \
                 fetched {}; parameters `{params}`",
                experiment.label,
                p.experiment,
                p.step,
                p.kind,
                p.block,
                p.nodes,
                p.size.as_deref().unwrap_or("unknown size"),
                p.image.as_deref().unwrap_or("unknown"),
                p.dsinfra_version,
                p.date
            );
        }
    }
    out.push('\n');
    let cells = cells(experiments);
    for (i, line) in cells.iter().enumerate() {
        let _ = writeln!(out, "| {} |", line.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", "---|".repeat(line.len()));
        }
    }
    let warnings = cache_warnings(experiments);
    if !warnings.is_empty() {
        out.push('\n');
        for warning in warnings {
            let _ = writeln!(out, "> Note: {warning}.");
        }
    }
    for chart in charts {
        let _ = write!(
            out,
            "\n## {}\n\n![{}]({})\n",
            chart.title, chart.title, chart.file
        );
    }
    out
}

/// Every file of the report: the markdown and the charts, by file name.
pub fn report_documents(experiments: &[Experiment]) -> Vec<(String, String)> {
    let charts = report_chart::charts(experiments);
    let mut documents = vec![(MARKDOWN.to_owned(), report_markdown(experiments, &charts))];
    documents.extend(charts.into_iter().map(|c| (c.file, c.svg)));
    documents
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::steps::results::Provenance;

    fn experiment(label: &str, dropped: bool) -> Experiment {
        let row = |operation: &str, caches_dropped| Row {
            operation: operation.into(),
            path: "/mnt/blob".into(),
            threads: 1,
            block_size: 1 << 20,
            file_size: 16 << 20,
            files: 4,
            nodes: 1,
            mib_per_s: 120.5,
            iops: 120.5,
            latency_us: None,
            caches_dropped,
        };
        Experiment {
            label: label.into(),
            results: vec![Results {
                provenance: Provenance {
                    experiment: label.into(),
                    block: "vm.box".into(),
                    step: "compare".into(),
                    kind: "storage_bench".into(),
                    size: Some("Standard_D4ds_v5".into()),
                    image: None,
                    nodes: 1,
                    params: BTreeMap::new(),
                    dsinfra_version: "0.1.0".into(),
                    date: "2026-11-26T00:00:00Z".into(),
                },
                rows: vec![row("write", None), row("read-cold", Some(dropped))],
            }],
        }
    }

    #[test]
    fn a_cold_pass_without_dropped_caches_is_said_and_two_experiments_sit_side_by_side() {
        let one = [experiment("a", false)];
        let text = report_text(&one);
        assert!(text.starts_with("step "), "{text}");
        assert!(text.contains("NOT dropped"), "{text}");
        assert!(
            text.contains(
                "note: a, step `compare`: the page cache was not dropped before \
                               the read-cold pass on /mnt/blob"
            ),
            "{text}"
        );
        let documents = report_documents(&one);
        let names: Vec<&str> = documents.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["report.md", "paths-compare.svg"]);
        let markdown = &documents[0].1;
        assert!(
            markdown.contains(
                "| compare | read-cold | /mnt/blob | 1 | 1M | 16M | 4 | 1 | \
                                   120.5 | 120 | - | NOT dropped |"
            ),
            "{markdown}"
        );
        assert!(markdown.contains("> Note: a, step `compare`"), "{markdown}");
        assert!(
            markdown.contains("of Standard_D4ds_v5, image unknown"),
            "{markdown}"
        );

        let two = [experiment("a", true), experiment("b", true)];
        let text = report_text(&two);
        assert!(text.starts_with("experiment  step"), "{text}");
        assert!(!text.contains("note:"), "{text}");
        let svg = &report_documents(&two)[1].1;
        assert!(
            svg.contains("<title>a: /mnt/blob; pass=write") && svg.contains("<title>b: /mnt/blob")
        );
    }
}
