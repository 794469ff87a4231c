//! Benchmark results as one tidy table: elbencho's CSV and fio's JSON become the same [`Row`]
//! type (one row per measured point), stored with the [`Provenance`] that produced them.
//!
//! The stored form is JSON lines (`.dsinfra/<manifest>/results/<step>.jsonl`): the first line is
//! the provenance, every further line one row. JSON lines rather than CSV because the provenance
//! holds nested values (the step's parameters) that a CSV cell would flatten into a string, and
//! because a row may lack a value (fio measures no per-file latency) without a placeholder.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What produced a results file: enough to tell two experiments' numbers apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The manifest's experiment name.
    pub experiment: String,
    /// The block the step ran on (`cluster.scratch`).
    pub block: String,
    /// The manifest step's name.
    pub step: String,
    /// Its kind (`elbencho`, `storage_bench`).
    pub kind: String,
    /// The VM size of the nodes, when known.
    pub size: Option<String>,
    /// The image the nodes booted (publisher:offer:sku), when known.
    pub image: Option<String>,
    /// How many nodes the block has.
    pub nodes: usize,
    /// The step's parameters, as the manifest gave them (defaults filled).
    pub params: BTreeMap<String, Value>,
    /// The dsinfra version that ran the step.
    pub dsinfra_version: String,
    /// When the results were fetched (RFC 3339, UTC).
    pub date: String,
}

/// One measured point: one operation at one set of parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `write` or `read` (elbencho), or the pass (`write`, `read-cold`, `read-warm`) for fio.
    pub operation: String,
    /// The directory measured (the `storage_bench` path; the elbencho directory).
    pub path: String,
    /// Threads per node (fio: jobs).
    pub threads: u64,
    /// I/O block size in bytes.
    pub block_size: u64,
    /// Size of each file in bytes.
    pub file_size: u64,
    /// Files per thread.
    pub files: u64,
    /// Nodes generating load.
    pub nodes: u64,
    /// Throughput in MiB/s (2^20 bytes per second), all nodes together.
    pub mib_per_s: f64,
    /// I/O operations per second, all nodes together.
    pub iops: f64,
    /// Mean I/O latency in microseconds.
    pub latency_us: Option<f64>,
    /// For reads: whether the page cache was dropped before the pass (`None` where it does not
    /// apply). `Some(false)` on a "cold" pass means it could not be dropped (no root), so the
    /// pass may have read from memory.
    pub caches_dropped: Option<bool>,
}

/// A results file: its provenance and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    /// What produced the rows.
    pub provenance: Provenance,
    /// The rows, in the order measured.
    pub rows: Vec<Row>,
}

impl Results {
    /// The JSON-lines text: provenance first, then one row per line.
    pub fn to_jsonl(&self) -> String {
        let mut out = serde_json::to_string(&self.provenance).unwrap_or_default();
        out.push('\n');
        for row in &self.rows {
            out.push_str(&serde_json::to_string(row).unwrap_or_default());
            out.push('\n');
        }
        out
    }

    /// Reads [`Results::to_jsonl`]'s text back.
    pub fn from_jsonl(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty()).enumerate();
        let (_, first) = lines.next().ok_or("the file is empty")?;
        let provenance = serde_json::from_str(first).map_err(|e| format!("line 1: {e}"))?;
        let rows = lines
            .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1)))
            .collect::<Result<_, _>>()?;
        Ok(Self { provenance, rows })
    }
}

/// Parses a size as the steps write it (`4K`, `64M`, `1G`, `512`) into bytes (binary units,
/// as elbencho and fio read them).
pub fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Formats bytes as the shortest exact binary size (`4K`, `64M`, `1536K`, `100`).
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Splits one CSV line into fields (double quotes around a field, `""` inside one).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let field = fields.last_mut().expect("never empty");
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            _ => field.push(c),
        }
    }
    fields
}

/// Parses elbencho's `--csvfile` output (columns as documented in elbencho's docs/csv-docs.md:
/// `hosts`, `threads`, `files`, `file size`, `block size`, `operation`, `IOPS [last]`,
/// `MiB/s [last]`, `IO lat us [avg]`, ...; a header line each time the file was started) into
/// rows for the WRITE and READ phases. The `[last]` columns are the aggregate over every thread
/// when the slowest finished: the whole run. Reads are done with caches dropped (`--dropcache`).
pub fn parse_elbencho_csv(text: &str, path: &str) -> Result<Vec<Row>, String> {
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields = csv_fields(line);
        if fields.iter().any(|f| f == "operation") {
            header = Some(fields);
            continue;
        }
        let names = header
            .as_ref()
            .ok_or_else(|| format!("line {}: a row before elbencho's header", number + 1))?;
        let get = |name: &str| -> Result<&str, String> {
            names
                .iter()
                .position(|n| n == name)
                .and_then(|i| fields.get(i))
                .map(|v| v.trim())
                .ok_or_else(|| format!("line {}: no `{name}` column", number + 1))
        };
        let int = |name: &str| -> Result<u64, String> {
            get(name)?
                .parse()
                .map_err(|_| format!("line {}: `{name}` is not a whole number", number + 1))
        };
        let float = |name: &str| -> Result<f64, String> {
            get(name)?
                .parse()
                .map_err(|_| format!("line {}: `{name}` is not a number", number + 1))
        };
        let operation = get("operation")?.to_ascii_lowercase();
        if operation != "write" && operation != "read" {
            continue;
        }
        rows.push(Row {
            caches_dropped: (operation == "read").then_some(true),
            operation,
            path: path.to_owned(),
            threads: int("threads")?,
            block_size: int("block size")?,
            file_size: int("file size")?,
            files: int("files")?,
            nodes: int("hosts")?,
            mib_per_s: float("MiB/s [last]")?,
            iops: float("IOPS [last]")?,
            latency_us: float("IO lat us [avg]").ok(),
        });
    }
    Ok(rows)
}

/// The line `storage_bench` writes before each fio JSON document in its results file.
pub const FIO_PASS_PREFIX: &str = "### dsinfra-pass ";

/// Parses `storage_bench`'s results file: for each path and pass, a line
/// `### dsinfra-pass path=/mnt/x pass=read-cold dropped=yes|no|n/a threads=1 files=4
/// file_size=1048576 block_size=1048576` followed by fio's `--output-format=json` document.
/// One row per pass, summed over fio's jobs.
pub fn parse_fio_passes(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let text = text.trim_start();
    if text.is_empty() {
        return Ok(rows);
    }
    if !text.starts_with(FIO_PASS_PREFIX) {
        return Err("no `### dsinfra-pass` line first: not a storage_bench results file".into());
    }
    for section in text.split(FIO_PASS_PREFIX).skip(1) {
        let (head, body) = section.split_once('\n').unwrap_or((section, ""));
        let tags: BTreeMap<&str, &str> = head
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let tag = |name: &str| {
            tags.get(name)
                .copied()
                .ok_or_else(|| format!("pass line {head:?} has no `{name}=`"))
        };
        let int = |name: &str| -> Result<u64, String> {
            tag(name)?
                .parse()
                .map_err(|_| format!("pass line {head:?}: `{name}` is not a whole number"))
        };
        // fio may print warnings before its JSON document.
        let json = body.find('{').map_or("", |i| &body[i..]);
        let doc: Value = serde_json::from_str(json.trim())
            .map_err(|e| format!("fio's JSON for {head:?} does not parse: {e}"))?;
        let operation = tag("pass")?.to_owned();
        let side = if operation == "write" {
            "write"
        } else {
            "read"
        };
        let (bw, iops, lat) = fio_sums(&doc, side)?;
        rows.push(Row {
            caches_dropped: match tag("dropped")? {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            },
            operation,
            path: tag("path")?.to_owned(),
            threads: int("threads")?,
            block_size: int("block_size")?,
            file_size: int("file_size")?,
            files: int("files")?,
            nodes: 1,
            mib_per_s: bw / f64::from(1 << 20),
            iops,
            latency_us: lat,
        });
    }
    Ok(rows)
}

/// fio's bandwidth (bytes/s) and IOPS summed over its jobs, and their mean latency (µs), for the
/// `read` or `write` side.
fn fio_sums(doc: &Value, side: &str) -> Result<(f64, f64, Option<f64>), String> {
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or("fio's JSON has no `jobs`")?;
    let (mut bw, mut iops, mut lat_sum, mut lat_n) = (0.0, 0.0, 0.0, 0u32);
    for job in jobs {
        let part = job
            .get(side)
            .ok_or_else(|| format!("a fio job has no `{side}` section"))?;
        let number = |key: &str| part.get(key).and_then(Value::as_f64);
        bw += number("bw_bytes").ok_or("a fio job has no `bw_bytes`")?;
        iops += number("iops").unwrap_or(0.0);
        if let Some(mean) = part.pointer("/lat_ns/mean").and_then(Value::as_f64) {
            lat_sum += mean / 1000.0;
            lat_n += 1;
        }
    }
    Ok((bw, iops, (lat_n > 0).then(|| lat_sum / f64::from(lat_n))))
}

#[cfg(test)]
// The numbers compared are exact in binary (sums and quotients of small powers of two).
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    /// elbencho's documented columns (docs/csv-docs.md in breuner/elbencho), in its order.
    const HEADER: &str = "ISO date,label,path type,paths,hosts,threads,dirs,files,file size,\
        block size,direct IO,random,random aligned,IO depth,shared paths,truncate,operation,\
        time ms [first],time ms [last],CPU% [first],CPU% [last],entries/s [first],\
        entries/s [last],IOPS [first],IOPS [last],MiB/s [first],MiB/s [last],entries [first],\
        entries [last],MiB [first],MiB [last],Ent lat us [min],Ent lat us [avg],\
        Ent lat us [max],IO lat us [min],IO lat us [avg],IO lat us [max],version,command";

    #[test]
    fn elbencho_rows_are_the_write_and_read_phases() {
        let csv = format!(
            "{HEADER}\n\
             2026-11-26T10:00:00Z,,dir,1,4,2,1,4,1048576,262144,0,0,,1,1,0,MKDIRS,1,1,0,0,\
             1,1,0,0,0,0,1,1,0,0,1,1,1,,,,3.0-25,\"elbencho --hosts a,b\"\n\
             2026-11-26T10:00:01Z,,dir,1,4,2,1,4,1048576,262144,0,0,,1,1,0,WRITE,10,12,5,6,\
             1,1,900,800,250.5,200.25,1,1,0,0,1,1,1,10,20.5,30,3.0-25,\"elbencho -w\"\n\
             {HEADER}\n\
             2026-11-26T10:00:02Z,,dir,1,4,2,1,4,1048576,262144,0,0,,1,1,0,READ,10,12,5,6,\
             1,1,1000,960,300,240,1,1,0,0,1,1,1,10,15,30,3.0-25,\"elbencho -r\"\n"
        );
        let rows = parse_elbencho_csv(&csv, "/mnt/scratch/elbencho").expect("parses");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].operation, "write");
        assert_eq!(rows[0].mib_per_s, 200.25);
        assert_eq!(rows[0].iops, 800.0);
        assert_eq!(rows[0].latency_us, Some(20.5));
        assert_eq!((rows[0].threads, rows[0].nodes, rows[0].files), (2, 4, 4));
        assert_eq!((rows[0].block_size, rows[0].file_size), (262_144, 1 << 20));
        assert_eq!(rows[1].operation, "read");
        assert_eq!(rows[1].caches_dropped, Some(true));
        assert!(parse_elbencho_csv("1,2,3\n", "/x").is_err());
    }

    #[test]
    fn fio_passes_sum_jobs_and_keep_the_cache_state() {
        let fio = |bw: u64| {
            format!(
                "fio: a warning\n{{\"jobs\":[{{\"read\":{{\"bw_bytes\":{bw},\"iops\":4.0,\
                 \"lat_ns\":{{\"mean\":3000.0}}}},\"write\":{{\"bw_bytes\":0,\"iops\":0}}}},\
                 {{\"read\":{{\"bw_bytes\":{bw},\"iops\":4.0,\"lat_ns\":{{\"mean\":1000.0}}}},\
                 \"write\":{{\"bw_bytes\":0,\"iops\":0}}}}]}}\n"
            )
        };
        let text = format!(
            "{FIO_PASS_PREFIX}path=/a pass=read-cold dropped=no threads=2 files=4 \
             file_size=1048576 block_size=4096\n{}",
            fio(1 << 20)
        );
        let rows = parse_fio_passes(&text).expect("parses");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].mib_per_s, 2.0);
        assert_eq!(rows[0].iops, 8.0);
        assert_eq!(rows[0].latency_us, Some(2.0));
        assert_eq!(rows[0].caches_dropped, Some(false));
        assert!(parse_fio_passes("garbage").is_err());
    }

    #[test]
    fn sizes_and_jsonl_round_trip() {
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("4X"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(format_size(256 << 10), "256K");
        assert_eq!(format_size(3 << 29), "1536M");
        let results = Results {
            provenance: Provenance {
                experiment: "e".into(),
                block: "vm.a".into(),
                step: "s".into(),
                kind: "storage_bench".into(),
                size: None,
                image: None,
                nodes: 1,
                params: BTreeMap::new(),
                dsinfra_version: "0".into(),
                date: "d".into(),
            },
            rows: parse_fio_passes("").expect("empty is no rows"),
        };
        assert_eq!(Results::from_jsonl(&results.to_jsonl()), Ok(results));
    }
}
