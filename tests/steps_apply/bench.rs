//! Benchmarks end to end (issue 19): on a cluster of four sshd hosts, an `elbencho` sweep of
//! 2 thread counts x 2 block sizes (a stand-in for elbencho, which is no Debian package, writes
//! its CSV in elbencho's documented format) and a `storage_bench` step that runs the real fio on
//! two directories, write, cold read and warm read; apply fetches both and turns them into the
//! tidy results table; `dsinfra report` prints the table and writes report.md and SVG charts
//! whose points and bars read back as the rows' numbers; two manifests go side by side.

use std::collections::BTreeMap;

use super::*;

/// elbencho's CSV columns as its documentation lists them (docs/csv-docs.md in
/// github.com/breuner/elbencho, "Fields"), in its order: the stand-in writes exactly these.
const ELBENCHO_HEADER: &str = "ISO date,label,path type,paths,hosts,threads,dirs,files,\
file size,block size,direct IO,random,random aligned,IO depth,shared paths,truncate,operation,\
time ms [first],time ms [last],CPU% [first],CPU% [last],entries/s [first],entries/s [last],\
IOPS [first],IOPS [last],MiB/s [first],MiB/s [last],entries [first],entries [last],\
MiB [first],MiB [last],Ent lat us [min],Ent lat us [avg],Ent lat us [max],IO lat us [min],\
IO lat us [avg],IO lat us [max],version,command";

/// The stand-in's made-up bandwidth for a point: a function of its parameters, so the test
/// knows every row's number.
fn stand_in_mib(operation: &str, hosts: u64, threads: u64, block: u64) -> f64 {
    let per_thread = (block >> 10) as f64 / 16.0;
    let factor = if operation == "WRITE" { 1.0 } else { 1.5 };
    per_thread * (threads * hosts) as f64 * factor
}

/// An executable `elbencho` stand-in (Python) that logs its calls to `calls`; `--service`
/// listens on the port (once for the whole machine: every farm host is this machine) until
/// `--quit`; `-w`/`-r` with `--csvfile` append a row in elbencho's format.
fn write_elbencho_stand_in(path: &Path, calls: &Path) {
    let script = format!(
        r#"#!/usr/bin/env python3
import os, socket, sys, datetime
args = sys.argv[1:]
with open({calls:?}, "a") as log:
    log.write(" ".join(args) + "\n")
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
def size(text):
    units = {{"K": 10, "M": 20, "G": 30}}
    return int(text[:-1]) << units[text[-1]] if text[-1] in units else int(text)
pidfile = {pidfile:?}
if "--version" in args:
    print("elbencho 3.0-25 (dsinfra test stand-in)")
elif "--service" in args:
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", int(opt("--port", "1611"))))
            s.listen()
            open(pidfile, "w").write(str(os.getpid()))
            s.settimeout(600)
            s.accept()
        except OSError:
            pass
        os._exit(0)
elif "--quit" in args:
    try:
        os.kill(int(open(pidfile).read()), 15)
        os.remove(pidfile)
    except (OSError, ValueError):
        pass
elif ("-w" in args or "-r" in args) and opt("--csvfile"):
    csv = opt("--csvfile")
    op = "WRITE" if "-w" in args else "READ"
    hosts = len(opt("--hosts").split(","))
    threads, files = int(opt("-t")), int(opt("-N"))
    fsize, block = size(opt("-s")), size(opt("-b"))
    per_thread = (block >> 10) / 16.0
    mib = per_thread * threads * hosts * (1.0 if op == "WRITE" else 1.5)
    iops = mib * 1024 / (block >> 10)
    row = [datetime.datetime.utcnow().isoformat(), "", "dir", 1, hosts, threads, 1, files,
           fsize, block, 0, 0, "", 1, 1, 0, op, 10, 12, 5, 6, 1, 1, iops, iops, mib, mib,
           1, 1, 1, 1, 1, 1, 1, 50, 100 + threads, 200, "3.0-25",
           '"elbencho ' + " ".join(args) + '"']
    new = not os.path.exists(csv)
    with open(csv, "a") as f:
        if new:
            f.write({header:?} + "\n")
        f.write(",".join(str(v) for v in row) + "\n")
"#,
        calls = calls.display().to_string(),
        pidfile = path.with_extension("pid").display().to_string(),
        header = ELBENCHO_HEADER,
    );
    std::fs::write(path, script).expect("stand-in written");
    std::fs::set_permissions(
        path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("stand-in executable");
}

/// Runs `dsinfra report ARGS` in the world's directory (it takes no ARM endpoint: it reads
/// local files only).
async fn report(w: &World, args: &[&str]) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsinfra"));
    cmd.current_dir(w.path(""))
        .arg("report")
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    let out = output(cmd).await;
    let text = describe(&out);
    (out, text)
}

/// The rows of a results file (after its provenance line).
fn result_rows(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was written: {e}", path.display()));
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"));
    let provenance = lines.next().expect("a provenance line");
    (provenance, lines.collect())
}

/// An attribute of an SVG element's text.
fn attr(element: &str, name: &str) -> f64 {
    let start = element
        .find(&format!(" {name}=\""))
        .unwrap_or_else(|| panic!("{name} in {element}"))
        + name.len()
        + 3;
    let end = start + element[start..].find('"').expect("a closing quote");
    element[start..end].parse().expect("a number")
}

/// Every element `<tag ...>...</tag>` (or `<tag .../>`) of `svg`, as text.
fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    let close = format!("</{tag}>");
    svg.match_indices(&open)
        .map(|(i, _)| {
            let tag_end = i + svg[i..].find('>').expect("a tag end") + 1;
            if svg[..tag_end].ends_with("/>") {
                return &svg[i..tag_end];
            }
            let end = i + svg[i..].find(&close).expect("closed") + close.len();
            &svg[i..end]
        })
        .collect()
}

/// The value a y pixel stands for, read from the y axis's labelled ticks (first and last).
fn y_axis(svg: &str) -> impl Fn(f64) -> f64 {
    let ticks: Vec<(f64, f64)> = elements(svg, "text")
        .into_iter()
        .filter(|t| t.contains("class=\"y-tick\""))
        .map(|t| {
            let label = &t[t.find('>').expect("text") + 1..t.find("</text>").expect("end")];
            (attr(t, "y"), label.parse::<f64>().expect("a tick value"))
        })
        .collect();
    assert!(ticks.len() >= 2, "the y axis has ticks:\n{svg}");
    let (a, b) = (ticks[0], ticks[ticks.len() - 1]);
    move |y| a.1 + (y - a.0) * (b.1 - a.1) / (b.0 - a.0)
}

/// The `key=value` fields of an element's `<title>` (`...; threads=2; MiB/s=12.5`).
fn title_fields(element: &str) -> BTreeMap<String, String> {
    let start = element.find("<title>").expect("a title") + 7;
    let end = element.find("</title>").expect("a title end");
    element[start..end]
        .split("; ")
        .enumerate()
        .map(|(i, part)| match part.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (format!("label{i}"), part.to_owned()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_on_four_hosts_and_fio_on_two_paths_become_one_table_and_charts() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    if let Err(e) = std::process::Command::new("fio").arg("--version").output() {
        assert!(
            std::env::var_os("CI").is_none(),
            "fio is required under CI: {e}"
        );
        eprintln!("NOT RUN: fio is not installed ({e}); scripts/test installs it");
        return;
    }
    let stand_in = w.path("elbencho-stand-in");
    let calls = w.path("elbencho-calls");
    write_elbencho_stand_in(&stand_in, &calls);
    let bench = w.path("bench");
    let (fast, slow) = (bench.join("fast"), bench.join("slow"));
    for dir in [&fast, &slow] {
        std::fs::create_dir_all(dir).expect("bench dirs");
    }
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "scratch" {{
  size           = "Standard_D2s_v3"
  count          = 4
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "elbencho" {{
    dir         = "{bench}/elbencho"
    csv         = "{bench}/elbencho.csv"
    threads     = [1, 2]
    block_sizes = ["256K", "1M"]
    files       = 2
    file_size   = "1M"
  }}
  step "storage_bench" {{
    paths      = ["{fast}", "{slow}"]
    files      = 2
    file_size  = "1M"
    block_size = "256K"
    results    = "{bench}/storage_bench.txt"
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
            bench = bench.display(),
            fast = fast.display(),
            slow = slow.display(),
        ),
    );
    let env = [("DSINFRA_ELBENCHO", stand_in.as_path())];
    let applied = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    let calls_text = std::fs::read_to_string(&calls).unwrap_or_default();
    // Every point: a write then a read with caches dropped, across the four nodes.
    for (t, b) in [(1, "256K"), (2, "256K"), (1, "1M"), (2, "1M")] {
        for phase in ["-w --sync --dropcache", "-r --sync --dropcache"] {
            let point = format!("-t {t} -n 1 -N 2 -s 1M -b {b} --csvfile");
            assert!(
                calls_text.lines().any(|l| l.contains(&point)
                    && l.contains(phase)
                    && l.matches(":1611").count() == 4),
                "{point} {phase} in\n{calls_text}\n{applied}"
            );
        }
    }
    let state_dir = w.path(".dsinfra/stepsdemo");
    let rows = sweep_rows(&state_dir);
    let passes = fio_passes(&state_dir, &fast, &slow);
    report_and_charts(&w, &state_dir, &rows, &passes).await;
    side_by_side(&w, &state_dir, &rows).await;
}

/// The sweep's results: one row per point and phase, with the stand-in's numbers.
fn sweep_rows(state_dir: &Path) -> Vec<Value> {
    let (provenance, rows) = result_rows(&state_dir.join("results/elbencho.jsonl"));
    assert_eq!(provenance["kind"], "elbencho", "{provenance}");
    assert_eq!(provenance["nodes"], 4);
    assert_eq!(provenance["size"], "Standard_D2s_v3");
    assert_eq!(provenance["params"]["threads"], serde_json::json!([1, 2]));
    assert_eq!(provenance["dsinfra_version"], env!("CARGO_PKG_VERSION"));
    assert!(
        provenance["image"].as_str().is_some_and(|i| !i.is_empty()),
        "{provenance}"
    );
    assert_eq!(rows.len(), 8, "{rows:?}");
    for row in &rows {
        let op = if row["operation"] == "write" {
            "WRITE"
        } else {
            "READ"
        };
        let expected = stand_in_mib(
            op,
            4,
            row["threads"].as_u64().expect("threads"),
            row["block_size"].as_u64().expect("block"),
        );
        assert_eq!(row["mib_per_s"].as_f64(), Some(expected), "{row}");
        assert_eq!(
            (row["nodes"].as_u64(), row["files"].as_u64()),
            (Some(4), Some(2))
        );
        assert_eq!(row["file_size"], 1 << 20);
    }

    // fio really ran: three passes per path, each with bandwidth, and the cold pass says
    // whether the page cache could be dropped (root on this machine may or may not).
    rows
}

/// fio really ran: three passes per path, each with bandwidth, and the cold pass says whether
/// the page cache could be dropped (root on this machine may or may not).
fn fio_passes(state_dir: &Path, fast: &Path, slow: &Path) -> Vec<Value> {
    let (provenance, passes) = result_rows(&state_dir.join("results/storage_bench.jsonl"));
    assert_eq!(provenance["kind"], "storage_bench");
    let seen: Vec<(String, String)> = passes
        .iter()
        .map(|p| {
            (
                p["path"].as_str().expect("path").to_owned(),
                p["operation"].as_str().expect("op").to_owned(),
            )
        })
        .collect();
    let mut expected = Vec::new();
    for path in [fast, slow] {
        for pass in ["write", "read-cold", "read-warm"] {
            expected.push((path.display().to_string(), pass.to_owned()));
        }
    }
    assert_eq!(seen, expected, "{passes:?}");
    for pass in &passes {
        assert!(
            pass["mib_per_s"].as_f64().is_some_and(|m| m > 0.0),
            "{pass}"
        );
        assert!(pass["iops"].as_f64().is_some_and(|m| m > 0.0), "{pass}");
        let dropped = &pass["caches_dropped"];
        assert_eq!(
            dropped.is_boolean(),
            pass["operation"] == "read-cold",
            "{pass}"
        );
        assert_eq!(pass["block_size"], 256 << 10);
    }
    assert!(
        !fast.join("dsinfra-storage-bench").exists(),
        "the files are removed"
    );
    passes
}

/// `dsinfra report`: the table, report.md, and charts whose points and bars are the rows.
async fn report_and_charts(w: &World, state_dir: &Path, rows: &[Value], passes: &[Value]) {
    let not_dropped = passes
        .iter()
        .any(|p| p["caches_dropped"] == serde_json::json!(false));
    let (out, reported) = report(w, &["stepsdemo.hcl"]).await;
    assert!(out.status.success(), "{reported}");
    assert!(
        reported.contains("MiB/s") && reported.contains("read-warm"),
        "{reported}"
    );
    assert_eq!(
        reported.contains("the page cache was not dropped"),
        not_dropped,
        "{reported}"
    );
    let reports = state_dir.join("reports");
    let markdown = std::fs::read_to_string(reports.join("report.md")).expect("report.md");
    assert!(
        markdown.contains("| step | operation | path | threads |"),
        "{markdown}"
    );
    assert!(markdown.contains("(threads-elbencho.svg)"), "{markdown}");
    assert!(markdown.contains("(paths-storage_bench.svg)"), "{markdown}");

    // The sweep chart: one point per row, at the row's bandwidth on the chart's own axis.
    let svg = std::fs::read_to_string(reports.join("threads-elbencho.svg")).expect("svg");
    let value_at = y_axis(&svg);
    let points = elements(&svg, "circle");
    assert_eq!(points.len(), rows.len(), "{svg}");
    for row in rows {
        let label = format!(
            "{} {}",
            if row["block_size"] == 256 << 10 {
                "256K"
            } else {
                "1M"
            },
            row["operation"].as_str().expect("op")
        );
        let threads = row["threads"].to_string();
        let point = points
            .iter()
            .find(|p| {
                let f = title_fields(p);
                f["label0"] == label && f["threads"] == threads
            })
            .unwrap_or_else(|| panic!("a point for {label} at {threads} threads:\n{svg}"));
        let expected = row["mib_per_s"].as_f64().expect("MiB/s");
        let drawn = value_at(attr(point, "cy"));
        assert!(
            (drawn - expected).abs() < 0.05,
            "{label} {threads}: {drawn} vs {expected}"
        );
        assert_eq!(
            title_fields(point)["MiB/s"].parse::<f64>().ok(),
            Some(expected)
        );
    }
    // The comparison chart: one bar per path and pass, as tall as its bandwidth.
    let svg = std::fs::read_to_string(reports.join("paths-storage_bench.svg")).expect("svg");
    let value_at = y_axis(&svg);
    let bars = elements(&svg, "rect")
        .into_iter()
        .filter(|r| r.contains("class=\"bar\""))
        .collect::<Vec<_>>();
    assert_eq!(bars.len(), passes.len(), "{svg}");
    for pass in passes {
        let bar = bars
            .iter()
            .find(|b| {
                let f = title_fields(b);
                f["label0"] == pass["path"].as_str().expect("path")
                    && f["pass"] == pass["operation"]
            })
            .unwrap_or_else(|| panic!("a bar for {pass}:\n{svg}"));
        let expected = pass["mib_per_s"].as_f64().expect("MiB/s");
        let top = value_at(attr(bar, "y"));
        let bottom = value_at(attr(bar, "y") + attr(bar, "height"));
        let tolerance = value_at(0.0) / 1000.0 + 0.01;
        assert!((top - expected).abs() < tolerance, "{pass}: top {top}");
        assert!(
            bottom.abs() < tolerance,
            "{pass}: the bar starts at 0, not {bottom}"
        );
    }
}

/// A second manifest's results side by side with the first's; none at all is an error.
async fn side_by_side(w: &World, state_dir: &Path, rows: &[Value]) {
    let other = w.path(".dsinfra/other/results");
    std::fs::create_dir_all(&other).expect("other results");
    std::fs::copy(
        state_dir.join("results/elbencho.jsonl"),
        other.join("elbencho.jsonl"),
    )
    .expect("copied");
    std::fs::write(w.path("other.hcl"), "experiment = \"other\"\n").expect("other manifest");
    let (out, both) = report(w, &["stepsdemo.hcl", "other.hcl"]).await;
    assert!(out.status.success(), "{both}");
    assert!(both.contains("experiment  step"), "{both}");
    assert!(
        both.contains("other") && both.contains("stepsdemo"),
        "{both}"
    );
    let reports = state_dir.join("reports");
    let svg = std::fs::read_to_string(reports.join("threads-elbencho.svg")).expect("svg");
    assert_eq!(elements(&svg, "circle").len(), 2 * rows.len(), "{svg}");
    assert!(
        svg.contains("other: 1M write") && svg.contains("stepsdemo: 1M write"),
        "{svg}"
    );

    // Without results, report says how to get them.
    std::fs::write(w.path("empty.hcl"), "experiment = \"empty\"\n").expect("manifest");
    let (out, text) = report(w, &["empty.hcl"]).await;
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("has no benchmark results"), "{text}");
}
