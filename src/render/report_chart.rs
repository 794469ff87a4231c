//! The report's SVG charts, written directly: bandwidth against threads with one line per block
//! size and operation (the BeeOND tutorial's figures) for `elbencho` sweeps, and bars per path
//! and pass for `storage_bench`.
//!
//! Written by hand rather than with a plotting crate: two chart shapes need a few dozen elements
//! each, and the one crate that fits (plotters with only its SVG backend) would add its own
//! dependency tree for that. Every point and bar carries a `<title>` (a tooltip in browsers)
//! naming its number, and the y axis labels its ticks, so a reader, or a test, can read each
//! value back from the drawing.

use std::fmt::Write as _;

use crate::engine::op::report::Experiment;
use crate::steps::results::{Row, format_size};

/// One chart: its file name in `reports/`, its title and its SVG text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// `threads-<step>.svg` or `paths-<step>.svg`.
    pub file: String,
    /// What it shows.
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;
/// Colours for series, in order (colour-blind-safe Okabe-Ito palette).
const COLOURS: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

/// Every chart of the report: one per benchmark step name (both manifests' results on it).
pub fn charts(experiments: &[Experiment]) -> Vec<Chart> {
    let mut steps: Vec<(String, String)> = Vec::new();
    for results in experiments.iter().flat_map(|e| &e.results) {
        let key = (
            results.provenance.kind.clone(),
            results.provenance.step.clone(),
        );
        if !steps.contains(&key) {
            steps.push(key);
        }
    }
    steps
        .iter()
        .filter_map(|(kind, step)| {
            let rows = step_rows(experiments, step);
            match kind.as_str() {
                "elbencho" => Some(sweep_chart(step, &rows, experiments.len() > 1)),
                "storage_bench" => Some(bars_chart(step, &rows, experiments.len() > 1)),
                _ => None,
            }
        })
        .collect()
}

/// The rows of step `step` in every experiment, with the experiment's label.
fn step_rows<'a>(experiments: &'a [Experiment], step: &str) -> Vec<(&'a str, &'a Row)> {
    experiments
        .iter()
        .flat_map(|e| {
            e.results
                .iter()
                .filter(move |r| r.provenance.step == step)
                .flat_map(move |r| r.rows.iter().map(move |row| (e.label.as_str(), row)))
        })
        .collect()
}

/// The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value`.
fn nice_max(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|v| *v >= value)
        .unwrap_or(10.0 * power)
}

/// The y pixel of `value` on an axis from 0 to `max`.
fn y_of(value: f64, max: f64) -> f64 {
    TOP + PLOT_H * (1.0 - value / max)
}

/// Escapes text for SVG.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The document's start: title, y axis from 0 to `max` MiB/s with labelled ticks, the x axis
/// line and its label.
fn frame(title: &str, max: f64, x_label: &str) -> String {
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>\n\
         <text class=\"title\" x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n",
        LEFT + PLOT_W / 2.0,
        escape(title)
    );
    for i in 0..=5 {
        let value = max * f64::from(i) / 5.0;
        let y = y_of(value, max);
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.2}\" x2=\"{}\" y2=\"{y:.2}\" stroke=\"#ddd\"/>\n\
             <text class=\"y-tick\" x=\"{}\" y=\"{y:.2}\" text-anchor=\"end\" \
             dominant-baseline=\"middle\">{}</text>",
            LEFT + PLOT_W,
            LEFT - 8.0,
            trim_number(value)
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"black\"/>\n\
         <line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"black\"/>\n\
         <text x=\"{mid}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"20\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {})\">MiB/s</text>",
        HEIGHT - 20.0,
        escape(x_label),
        TOP + PLOT_H / 2.0,
        TOP + PLOT_H / 2.0,
        bottom = TOP + PLOT_H,
        right = LEFT + PLOT_W,
        mid = LEFT + PLOT_W / 2.0,
    );
    svg
}

/// A tick value without trailing zeros (`250`, `12.5`).
fn trim_number(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A legend entry at position `i`.
fn legend(svg: &mut String, i: usize, colour: &str, dashed: bool, label: &str) {
    #[allow(clippy::cast_precision_loss)] // A handful of legend lines.
    let y = TOP + 10.0 + 20.0 * i as f64;
    let x = LEFT + PLOT_W + 20.0;
    let dash = if dashed {
        " stroke-dasharray=\"6 4\""
    } else {
        ""
    };
    let _ = writeln!(
        svg,
        "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"3\"{dash}/>\
         <text class=\"legend\" x=\"{}\" y=\"{y}\" dominant-baseline=\"middle\">{}</text>",
        x + 24.0,
        x + 30.0,
        escape(label)
    );
}

/// One line of a sweep chart.
struct Series {
    label: String,
    dashed: bool,
    points: Vec<(u64, f64)>,
}

/// Bandwidth against threads: one line per (experiment,) block size and operation (reads
/// dashed); file size and file count join the label when the sweep varies them.
fn sweep_chart(step: &str, rows: &[(&str, &Row)], side_by_side: bool) -> Chart {
    let varies = |f: fn(&Row) -> u64| rows.windows(2).any(|w| f(w[0].1) != f(w[1].1));
    let (sizes_vary, files_vary) = (varies(|r| r.file_size), varies(|r| r.files));
    let mut series: Vec<Series> = Vec::new();
    for (label, row) in rows {
        let mut name = format!("{} {}", format_size(row.block_size), row.operation);
        if sizes_vary {
            let _ = write!(name, ", {} files", format_size(row.file_size));
        }
        if files_vary {
            let _ = write!(name, ", {} per thread", row.files);
        }
        if side_by_side {
            name = format!("{label}: {name}");
        }
        match series.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push((row.threads, row.mib_per_s)),
            None => series.push(Series {
                label: name,
                dashed: row.operation != "write",
                points: vec![(row.threads, row.mib_per_s)],
            }),
        }
    }
    let mut threads: Vec<u64> = rows.iter().map(|(_, r)| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    // Thread counts are spaced evenly, as the tutorial's figures do (1, 4, 16, 64).
    #[allow(clippy::cast_precision_loss)] // A handful of thread counts.
    let x_of = |t: u64| {
        let i = threads.iter().position(|x| *x == t).unwrap_or(0);
        LEFT + PLOT_W * (i as f64 + 0.5) / threads.len() as f64
    };
    let max = nice_max(rows.iter().map(|(_, r)| r.mib_per_s).fold(0.0, f64::max));
    let title = format!("{step}: bandwidth by threads per node");
    let mut svg = frame(&title, max, "threads per node");
    for t in &threads {
        let _ = writeln!(
            svg,
            "<text class=\"x-tick\" x=\"{:.2}\" y=\"{}\" text-anchor=\"middle\">{t}</text>",
            x_of(*t),
            TOP + PLOT_H + 18.0
        );
    }
    for (i, s) in series.iter_mut().enumerate() {
        s.points.sort_by_key(|p| p.0);
        let colour = COLOURS[(i / 2) % COLOURS.len()];
        let dash = if s.dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(t, v)| format!("{:.2},{:.2}", x_of(*t), y_of(*v, max)))
            .collect();
        let _ = writeln!(
            svg,
            "<g class=\"series\">\n<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" \
             stroke-width=\"2\"{dash}/>",
            points.join(" ")
        );
        for (t, v) in &s.points {
            let _ = writeln!(
                svg,
                "<circle class=\"point\" cx=\"{:.2}\" cy=\"{:.2}\" r=\"4\" fill=\"{colour}\">\
                 <title>{}; threads={t}; MiB/s={v}</title></circle>",
                x_of(*t),
                y_of(*v, max),
                escape(&s.label)
            );
        }
        svg.push_str("</g>\n");
        legend(&mut svg, i, colour, s.dashed, &s.label);
    }
    svg.push_str("</svg>\n");
    Chart {
        file: format!("threads-{step}.svg"),
        title,
        svg,
    }
}

/// Bars per (experiment,) path: one bar per pass (write, cold read, warm read).
fn bars_chart(step: &str, rows: &[(&str, &Row)], side_by_side: bool) -> Chart {
    let mut groups: Vec<String> = Vec::new();
    let mut passes: Vec<String> = Vec::new();
    for (label, row) in rows {
        let group = if side_by_side {
            format!("{label}: {}", row.path)
        } else {
            row.path.clone()
        };
        if !groups.contains(&group) {
            groups.push(group);
        }
        if !passes.contains(&row.operation) {
            passes.push(row.operation.clone());
        }
    }
    let max = nice_max(rows.iter().map(|(_, r)| r.mib_per_s).fold(0.0, f64::max));
    let title = format!("{step}: bandwidth per path and pass");
    let mut svg = frame(&title, max, "path");
    #[allow(clippy::cast_precision_loss)] // A handful of groups and bars.
    let (group_w, bar_w) = (
        PLOT_W / groups.len().max(1) as f64,
        PLOT_W / groups.len().max(1) as f64 * 0.8 / passes.len().max(1) as f64,
    );
    for (g, group) in groups.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let centre = LEFT + group_w * (g as f64 + 0.5);
        let _ = writeln!(
            svg,
            "<text class=\"x-tick\" x=\"{centre:.2}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP + PLOT_H + 18.0,
            escape(group)
        );
    }
    for (label, row) in rows {
        let group = if side_by_side {
            format!("{label}: {}", row.path)
        } else {
            row.path.clone()
        };
        let g = groups.iter().position(|x| *x == group).unwrap_or(0);
        let p = passes.iter().position(|x| *x == row.operation).unwrap_or(0);
        #[allow(clippy::cast_precision_loss)]
        let x = LEFT + group_w * g as f64 + group_w * 0.1 + bar_w * p as f64;
        let y = y_of(row.mib_per_s, max);
        let _ = writeln!(
            svg,
            "<rect class=\"bar\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{bar_w:.2}\" height=\"{:.2}\" \
             fill=\"{}\"><title>{}; pass={}; MiB/s={}</title></rect>",
            TOP + PLOT_H - y,
            COLOURS[p % COLOURS.len()],
            escape(&group),
            escape(&row.operation),
            row.mib_per_s
        );
    }
    for (p, pass) in passes.iter().enumerate() {
        legend(&mut svg, p, COLOURS[p % COLOURS.len()], false, pass);
    }
    svg.push_str("</svg>\n");
    Chart {
        file: format!("paths-{step}.svg"),
        title,
        svg,
    }
}

#[cfg(test)]
// The maxima are exact round numbers.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(2100.0), 2500.0);
        assert_eq!(trim_number(12.5), "12.5");
        assert_eq!(trim_number(200.0), "200");
        assert_eq!(escape("a<b&\"c\""), "a&lt;b&amp;&quot;c&quot;");
    }
}
