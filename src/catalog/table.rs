//! Reading the shipped catalog files (`data/catalog/*.csv`, written by
//! `scripts/catalog/generate.py`; formats in docs/catalog.md) into typed rows.
//!
//! The files are embedded in the binary, so a malformed row is a defect of the build, not of the
//! user's input: the parser says which file, line and column are wrong, and a unit test parses the
//! shipped files so such a build never leaves CI. Fields borrow from the embedded text, which is
//! why the parser takes `&'static str`.

use std::borrow::Cow;
use std::fmt;

use chrono::NaiveDate;

use super::{CpuArchitecture, GpuArch, Price, VmSize};

/// A row the parser could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableError {
    /// The file (its name in `data/catalog/`).
    pub file: &'static str,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "data/catalog/{}:{}: {}",
            self.file, self.line, self.message
        )
    }
}

impl std::error::Error for TableError {}

/// The provenance comments at the top of a file (`# key: value`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// `# generated:` date.
    pub generated: Option<NaiveDate>,
    /// `# prices-date:` date (prices file only).
    pub prices_date: Option<NaiveDate>,
    /// `# mode:` (`bootstrap` or `online`).
    pub mode: String,
    /// Every `# source:` line.
    pub sources: Vec<&'static str>,
}

/// One parsed file: its provenance and its data rows (line number, fields).
struct Csv {
    provenance: Provenance,
    rows: Vec<(usize, Vec<&'static str>)>,
}

/// The top of a file: its provenance comments, and where its data lines start (the byte
/// offset and the 1-based line after the header).
pub(super) struct Preamble {
    pub provenance: Provenance,
    pub body: usize,
    pub body_line: usize,
}

/// Reads a file's provenance comments (`# key: value`) and checks its header line, without
/// reading its rows: the price table is looked up in place ([`price_lines`]).
pub(super) fn preamble(
    file: &'static str,
    text: &'static str,
    header: &[&str],
) -> Result<Preamble, TableError> {
    let mut provenance = Provenance::default();
    let mut offset = 0;
    for (index, raw) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let err = |message: String| TableError {
            file,
            line: number,
            message,
        };
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if let Some((key, value)) = comment.split_once(": ") {
                let date = || {
                    NaiveDate::parse_from_str(value.trim(), "%Y-%m-%d")
                        .map_err(|e| err(format!("`{key}` is not a YYYY-MM-DD date: {e}")))
                };
                match key {
                    "generated" => provenance.generated = Some(date()?),
                    "prices-date" => provenance.prices_date = Some(date()?),
                    "mode" => value.trim().clone_into(&mut provenance.mode),
                    "source" => provenance.sources.push(value.trim()),
                    _ => {}
                }
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if !line.split(',').eq(header.iter().copied()) {
            return Err(err(format!(
                "header is `{line}`, expected `{}`",
                header.join(",")
            )));
        }
        return Ok(Preamble {
            provenance,
            body: offset,
            body_line: number + 1,
        });
    }
    Err(TableError {
        file,
        line: 1,
        message: "no header line".into(),
    })
}

fn read_csv(file: &'static str, text: &'static str, header: &[&str]) -> Result<Csv, TableError> {
    let Preamble {
        provenance,
        body,
        body_line,
    } = preamble(file, text, header)?;
    let mut rows = Vec::new();
    for (index, line) in text[body..].lines().enumerate() {
        let number = body_line + index;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&'static str> = line.split(',').collect();
        if fields.len() != header.len() {
            return Err(TableError {
                file,
                line: number,
                message: format!(
                    "{} fields, expected {} ({})",
                    fields.len(),
                    header.len(),
                    header.join(",")
                ),
            });
        }
        rows.push((number, fields));
    }
    Ok(Csv { provenance, rows })
}

const SIZES_HEADER: &[&str] = &[
    "name",
    "vcpus",
    "vcpus_available",
    "memory_gib",
    "gpus",
    "gpu_model",
    "gpu_arch",
    "temp_disk_gib",
    "quota_family",
    "generations",
    "rdma",
    "accelerated_networking",
    "premium_io",
    "cpu_architecture",
    "trusted_launch",
    "temp_nvme",
    "nvme_gib",
    "retirement_date",
    "facts",
];

pub(super) const PRICES_HEADER: &[&str] = &["name", "region", "linux_payg", "spot"];

/// One field of a row, parsed, with the error naming its column.
struct Row<'a> {
    file: &'static str,
    line: usize,
    header: &'a [&'a str],
    fields: &'a [&'static str],
}

impl Row<'_> {
    fn err(&self, column: usize, message: impl fmt::Display) -> TableError {
        TableError {
            file: self.file,
            line: self.line,
            message: format!("column `{}`: {message}", self.header[column]),
        }
    }

    fn text(&self, column: usize) -> &'static str {
        self.fields[column]
    }

    fn parse<T: std::str::FromStr>(&self, column: usize) -> Result<Option<T>, TableError>
    where
        T::Err: fmt::Display,
    {
        let text = self.fields[column];
        if text.is_empty() {
            return Ok(None);
        }
        text.parse()
            .map(Some)
            .map_err(|e| self.err(column, format!("`{text}`: {e}")))
    }

    fn required<T: std::str::FromStr>(&self, column: usize) -> Result<T, TableError>
    where
        T::Err: fmt::Display,
    {
        self.parse(column)?
            .ok_or_else(|| self.err(column, "empty, but every row must have it"))
    }
}

/// Parse `vm-sizes.csv`. Rows must be sorted by name and unique (case-insensitively, as ARM
/// compares them), so lookups can binary-search.
pub(super) fn parse_sizes(text: &'static str) -> Result<(Provenance, Vec<VmSize>), TableError> {
    const FILE: &str = "vm-sizes.csv";
    let csv = read_csv(FILE, text, SIZES_HEADER)?;
    let mut sizes: Vec<VmSize> = Vec::with_capacity(csv.rows.len());
    for (line, fields) in &csv.rows {
        let row = Row {
            file: FILE,
            line: *line,
            header: SIZES_HEADER,
            fields,
        };
        let size = size_row(&row)?;
        if let Some(previous) = sizes.last()
            && previous.name.to_ascii_lowercase() >= size.name.to_ascii_lowercase()
        {
            return Err(row.err(
                0,
                format!("`{}` is not after `{}`", size.name, previous.name),
            ));
        }
        sizes.push(size);
    }
    Ok((csv.provenance, sizes))
}

fn size_row(row: &Row<'_>) -> Result<VmSize, TableError> {
    let vcpus: u32 = row.required(1)?;
    let gpus: f64 = row.required(4)?;
    let gpu_arch = match row.text(6) {
        "" => None,
        arch => Some(GpuArch::from_name(arch).ok_or_else(|| {
            row.err(
                6,
                format!("`{arch}` is not a GPU architecture dsinfra knows"),
            )
        })?),
    };
    let generations = row.text(9);
    let (gen1, gen2) = (
        generations.split(' ').any(|g| g == "1"),
        generations.split(' ').any(|g| g == "2"),
    );
    if !gen1 && !gen2 {
        return Err(row.err(9, format!("`{generations}` names neither 1 nor 2")));
    }
    let cpu = match row.text(13) {
        "" => CpuArchitecture::of_name(row.text(0)),
        name => CpuArchitecture::from_name(name)
            .ok_or_else(|| row.err(13, format!("`{name}` is neither x64 nor Arm64")))?,
    };
    let retirement_date = match row.text(17) {
        "" => None,
        date => Some(
            NaiveDate::parse_from_str(date, "%Y-%m-%d")
                .map_err(|e| row.err(17, format!("`{date}`: {e}")))?,
        ),
    };
    Ok(VmSize {
        name: Cow::Borrowed(row.text(0)),
        vcpus,
        vcpus_available: row.parse(2)?.unwrap_or(vcpus),
        memory_gib: row.required(3)?,
        gpus,
        gpu_model: Cow::Borrowed(row.text(5)),
        gpu_arch,
        temp_disk_gib: row.parse(7)?,
        quota_family: Cow::Borrowed(row.text(8)),
        gen1,
        gen2,
        infiniband: row.parse::<bool>(10)? == Some(true),
        accelerated_networking: row.parse(11)?,
        premium_io: row.parse(12)?,
        cpu,
        trusted_launch: row.parse(14)?,
        temp_nvme: row.parse::<bool>(15)? == Some(true),
        nvme_gib: row.parse(16)?,
        retirement_date,
        facts: Cow::Borrowed(row.text(18)),
    })
}

/// One row of `vm-prices.csv`: the size's index in the size table, the region, the price.
pub(super) type PriceRow = (usize, &'static str, Price);

/// Parse `vm-prices.csv` against the sizes it prices, checking every row's size is known and the
/// rows are sorted by size (in the size table's order) then region. The commands do not (a
/// lookup reads a few lines in place, [`price_lines`], which needs that order); the unit tests
/// do, on the shipped file, so a build whose table is out of order never leaves CI.
#[cfg(test)]
pub(super) fn parse_prices(
    text: &'static str,
    sizes: &[VmSize],
) -> Result<(Provenance, Vec<PriceRow>), TableError> {
    const FILE: &str = "vm-prices.csv";
    let csv = read_csv(FILE, text, PRICES_HEADER)?;
    let mut out: Vec<PriceRow> = Vec::with_capacity(csv.rows.len());
    let mut cursor = 0;
    for (line, fields) in &csv.rows {
        let row = Row {
            file: FILE,
            line: *line,
            header: PRICES_HEADER,
            fields,
        };
        let name = row.text(0);
        // Sorted like the size table: move forward to this size, never back.
        while cursor < sizes.len() && !sizes[cursor].name.eq_ignore_ascii_case(name) {
            cursor += 1;
        }
        if cursor == sizes.len() {
            return Err(row.err(
                0,
                format!("`{name}` is not in vm-sizes.csv, or the rows are not sorted by it"),
            ));
        }
        let region = row.text(1);
        if let Some((index, previous, _)) = out.last()
            && *index == cursor
            && *previous >= region
        {
            return Err(row.err(1, format!("`{region}` is not after `{previous}`")));
        }
        let linux_payg: f64 = row.required(2)?;
        let spot: Option<f64> = row.parse(3)?;
        out.push((cursor, region, Price { linux_payg, spot }));
    }
    Ok((csv.provenance, out))
}

/// The price rows of the size at `index`, read in place from `body` (the price file's data lines,
/// sorted by size index as [`parse_prices`] checks) by a binary search over the text: a lookup
/// touches a few lines instead of the 2.5 MB table, which parsed whole cost every command
/// about 9 MB of memory for a handful of sizes (issue 32). `index_of` gives a size name's index
/// (`None` for an unknown name or an empty line: sorted last).
pub(super) fn price_lines(
    body: &'static str,
    index: usize,
    index_of: impl Fn(&str) -> Option<usize>,
) -> Vec<PriceRow> {
    let bytes = body.as_bytes();
    // The first line starting at or after `pos`.
    let line_start = |pos: usize| -> usize {
        if pos == 0 {
            return 0;
        }
        bytes[pos - 1..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| pos + i)
    };
    let name_at = |start: usize| body[start..].split([',', '\n']).next().unwrap_or_default();
    let rank = |start: usize| index_of(name_at(start)).unwrap_or(usize::MAX);
    // The smallest position whose next line's size is at or after `index`.
    let (mut lo, mut hi) = (0, bytes.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let start = line_start(mid);
        if start >= bytes.len() || rank(start) >= index {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    body[line_start(lo)..]
        .lines()
        .map_while(|line| {
            let mut fields = line.split(',');
            let name = fields.next()?;
            (index_of(name) == Some(index)).then_some(())?;
            let region = fields.next()?;
            let linux_payg = fields.next()?.parse().ok()?;
            let spot = fields.next().and_then(|s| s.parse().ok());
            Some((index, region, Price { linux_payg, spot }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "name,vcpus,vcpus_available,memory_gib,gpus,gpu_model,gpu_arch,temp_disk_gib,quota_family,generations,rdma,accelerated_networking,premium_io,cpu_architecture,trusted_launch,temp_nvme,nvme_gib,retirement_date,facts";

    fn sizes(rows: &str) -> Result<(Provenance, Vec<VmSize>), TableError> {
        let text = format!("# generated: 2026-11-26\n# source: a test\n{HEAD}\n{rows}");
        parse_sizes(Box::leak(text.into_boxed_str()))
    }

    #[test]
    fn a_row_reads_into_its_facts_and_empty_means_unknown() {
        let (provenance, rows) = sizes(
            "Standard_A_v1,2,,4.5,0.167,A10,Ampere,,fam,1 2,,true,,,,,,2028-05-01,anycloud\n\
             Standard_B_v1,176,144,768,0,,,0,famB,2,true,false,true,Arm64,false,true,880,,docs",
        )
        .expect("parses");
        assert_eq!(
            provenance.generated.map(|d| d.to_string()).as_deref(),
            Some("2026-11-26")
        );
        assert_eq!(provenance.sources, vec!["a test"]);
        let a = &rows[0];
        assert_eq!((a.vcpus_available, a.memory_gib, a.gpus), (2, 4.5, 0.167));
        assert_eq!((a.temp_disk_gib, a.premium_io), (None, None));
        assert_eq!(a.accelerated_networking, Some(true));
        // No architecture column value: the name's (x64 here); Trusted Launch unknown.
        assert_eq!((a.cpu, a.trusted_launch), (CpuArchitecture::X64, None));
        assert!(!a.temp_nvme && !a.nvme_only() && a.nvme_gib.is_none());
        assert!(a.gen1 && a.gen2 && !a.infiniband);
        assert_eq!(
            a.retirement_date.map(|d| d.to_string()).as_deref(),
            Some("2028-05-01")
        );
        let b = &rows[1];
        assert!(b.gen2_only() && b.infiniband);
        assert_eq!(
            (b.vcpus, b.vcpus_available, b.temp_disk_gib),
            (176, 144, Some(0))
        );
        assert!(b.arm64() && b.nvme_only());
        assert_eq!((b.trusted_launch, b.nvme_gib), (Some(false), Some(880)));
    }

    #[test]
    fn a_bad_row_names_its_file_line_and_column() {
        let err = sizes("Standard_A_v1,two,,4,0,,,,fam,1,,,,,,,,,x").expect_err("bad vcpus");
        assert_eq!(err.line, 4);
        assert!(
            err.to_string()
                .starts_with("data/catalog/vm-sizes.csv:4: column `vcpus`"),
            "{err}"
        );
        let err = sizes("Standard_A_v1,2,,4,0,,,,fam,3,,,,,,,,,x").expect_err("bad generation");
        assert!(err.message.contains("`generations`"), "{err}");
        let err =
            sizes("Standard_A_v1,2,,4,0,,,,fam,1,,,,ia64,,,,,x").expect_err("bad architecture");
        assert!(err.message.contains("`cpu_architecture`"), "{err}");
        let err = sizes("Standard_A_v1,2,,4,0,,,,fam,1,,,,,,,,").expect_err("short row");
        assert!(err.message.contains("18 fields, expected 19"), "{err}");
    }

    #[test]
    fn rows_out_of_order_are_refused() {
        let err =
            sizes("Standard_B_v1,2,,4,0,,,,f,1,,,,,,,,,x\nStandard_a_v1,2,,4,0,,,,f,1,,,,,,,,,x")
                .expect_err("unsorted");
        assert!(err.message.contains("is not after"), "{err}");
    }

    #[test]
    fn price_lines_find_each_sizes_rows_in_place_and_none_for_a_size_without_any() {
        let body = "A,eastus,0.1,0.02\nA,westeurope,0.12,\nC,eastus,0.3,\nD,eastus,0.4,0.1\n\n";
        let index_of = |name: &str| ["A", "B", "C", "D"].iter().position(|n| *n == name);
        let regions = |index| -> Vec<&str> {
            price_lines(body, index, index_of)
                .iter()
                .map(|(i, region, _)| {
                    assert_eq!(*i, index);
                    *region
                })
                .collect()
        };
        assert_eq!(regions(0), ["eastus", "westeurope"]);
        assert!(regions(1).is_empty(), "B has no row");
        assert_eq!(regions(2), ["eastus"]);
        assert_eq!(regions(3), ["eastus"]);
        assert!(regions(4).is_empty());
        assert_eq!(
            price_lines(body, 3, index_of)[0].2,
            Price {
                linux_payg: 0.4,
                spot: Some(0.1)
            }
        );
    }

    #[test]
    fn prices_belong_to_known_sizes_in_order() {
        let (_, rows) =
            sizes("Standard_A_v1,2,,4,0,,,,f,1,,,,,,,,,x\nStandard_B_v1,2,,4,0,,,,f,1,,,,,,,,,x")
                .expect("sizes");
        let prices = "# prices-date: 2026-05-20\nname,region,linux_payg,spot\n\
            Standard_A_v1,eastus,0.1,0.02\nStandard_A_v1,westeurope,0.12,\n\
            Standard_B_v1,eastus,0.2,";
        let (provenance, parsed) = parse_prices(prices, &rows).expect("prices");
        assert_eq!(
            provenance.prices_date.map(|d| d.to_string()).as_deref(),
            Some("2026-05-20")
        );
        assert_eq!(parsed.len(), 3);
        assert_eq!(
            parsed[1],
            (
                0,
                "westeurope",
                Price {
                    linux_payg: 0.12,
                    spot: None
                }
            )
        );
        assert_eq!(parsed[2].0, 1);
        let unknown = "name,region,linux_payg,spot\nStandard_C_v1,eastus,0.1,";
        let err = parse_prices(unknown, &rows).expect_err("unknown size");
        assert!(err.message.contains("not in vm-sizes.csv"), "{err}");
        let backwards =
            "name,region,linux_payg,spot\nStandard_B_v1,eastus,0.1,\nStandard_A_v1,eastus,0.1,";
        assert!(parse_prices(backwards, &rows).is_err());
    }
}
