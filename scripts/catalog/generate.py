#!/usr/bin/env python3
"""Generate dsinfra's shipped VM catalog: data/catalog/vm-sizes.csv and vm-prices.csv.

The two files (format: docs/catalog.md) are embedded in the binary, so the build never needs the
network; this script is how they are made and refreshed. It has two modes:

  bootstrap   offline, from files already on disk:
                --anycloud F        anycloud-sh/catalog azure/vms.csv (SkyPilot's schema): sizes,
                                    vCPUs, memory, GPUs, Hyper-V generations, per-region Linux
                                    pay-as-you-go and spot prices
                --known-skus F      Azure/karpenter-provider-azure known_skus.yaml: quota family
                --karpenter-prices F  (optional) karpenter's zz_generated.pricing.go, or a
                                    Region,InstanceType,PriceUSDPerHour CSV made from it: used only
                                    to cross-check the prices, never written to the catalog
  online      from Microsoft's APIs (what a maintainer runs before a release):
                the Azure Retail Prices API (anonymous) for Linux pay-as-you-go and spot prices,
                and Resource SKUs (needs a subscription and a token: AZURE_ACCESS_TOKEN, else
                `az account get-access-token`) for every capability and the quota family.

Both modes then apply the hand-curated overlays in data/catalog/sources/: docs-facts.csv fills the
facts the primary source left empty (a disagreement keeps the primary value and prints a
warning), and retirements.csv gives retirement dates. Output is sorted and prices are written as
the source's own decimal text, so two runs on the same input give the same bytes.

Examples:
  scripts/catalog/generate.py bootstrap --anycloud azure-vms.csv --known-skus known_skus.yaml \\
      --karpenter-prices zz_generated.pricing.go
  scripts/catalog/generate.py online --subscription 00000000-0000-0000-0000-000000000000
  scripts/catalog/generate.py online --regions eastus,westeurope --out /tmp/catalog

Warnings go to stderr; the summary (rows, sizes, regions, how many sizes have each fact known,
the price cross-check) goes to stdout. Exit status 1 on bad input, with file:line and what to fix.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import sys
from pathlib import Path

import bootstrap as bootstrap_mode
import online as online_mode
from common import (
    BOOLEAN_FIELDS, CPU_ARCHITECTURES, DOCS_FACTS_COLUMNS, PLATFORM_COLUMNS, PRICE_COLUMNS, REPO,
    RETIREMENT_COLUMNS, SIZE_COLUMNS, Catalog, InputError, Size, decimal, gpu_arch, is_gpu_family,
    label, naming_facts, run_date, same_value, warn,
)


# ---------------------------------------------------------------------------------------------
# Overlays: docs-facts.csv and retirements.csv
# ---------------------------------------------------------------------------------------------

def read_overlay(path: Path, columns: list[str]) -> list[tuple[int, dict]]:
    """Rows of a hand-curated source file, `#` lines skipped, with their line numbers."""
    if not path.exists():
        warn(f"{path}: missing; no rows applied")
        return []
    rows, header = [], None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if header is None:
            if fields != columns:
                raise InputError(f"{path}:{number}: expected the header {','.join(columns)}")
            header = fields
            continue
        if len(fields) != len(columns):
            raise InputError(f"{path}:{number}: {len(fields)} fields, expected {len(columns)} (no commas inside fields)")
        rows.append((number, dict(zip(columns, fields))))
    return rows


def overlay_source(path: Path, rows: list[tuple[int, dict]], what: str) -> str:
    """The `# source:` line of an overlay: what it gives, how many rows and pages, its terms."""
    pages = len({row["source"] for _, row in rows})
    return (
        f"{label(path)} ({what}), {len(rows)} rows citing {pages} pages of "
        "https://learn.microsoft.com/azure/virtual-machines/ (each row names its page; "
        "data/catalog/sources/README.md says how they were read), licence: facts from "
        "Microsoft's documentation, no text copied"
    )


def page_slug(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".md")


def validate_docs_row(path: Path, number: int, row: dict) -> None:
    where = f"{path}:{number}"
    if row["temp_disk_gib"] and not row["temp_disk_gib"].isdigit():
        raise InputError(f"{where}: temp_disk_gib must be a whole number of GiB or empty")
    for column in BOOLEAN_FIELDS:
        if row[column] not in ("", "true", "false"):
            raise InputError(f"{where}: {column} must be true, false or empty")
    if row["gpus"] and decimal(row["gpus"]) is None:
        raise InputError(f"{where}: gpus must be a number or empty")
    if not row["source"].startswith("https://"):
        raise InputError(f"{where}: source must be the page's https URL")


def refines(column: str, general: str, precise: str) -> bool:
    """Whether `precise` says the same as `general`, only more exactly.

    Two such cases are known. Resource SKUs' `GPUs` (and so anycloud's count) is 1 for a size
    that has a partition of one GPU (NV6ads_A10_v5: a sixth of an A10, NV4as_v4: an eighth of an
    MI25), while the size's page gives the fraction, the fact a user needs. And a model name with
    a variant (`H100-NVL`, `A100-80GB`) is the same GPU as the bare name (`H100`, or the `_A100_`
    of a size name) said more exactly.
    """
    if column == "gpus":
        value = decimal(precise)
        return general == "1" and value is not None and 0 < value < 1
    if column == "gpu_model":
        return precise.upper().startswith(general.upper() + "-")
    return False


def fill(size: Size, column: str, value: str, tag: str, origin: str) -> None:
    """Give a size a fact from a lower-precedence source: fill it if unknown, else check it.

    A more exact value (see `refines`) replaces the primary one; any other disagreement keeps the
    primary value and prints a warning.
    """
    if value == "":
        return
    current = size.get(column)
    if current == "" or refines(column, current, value):
        size.values[column] = value
        size.tag(tag)
    elif same_value(column, current, value) or refines(column, value, current):
        size.tag(tag)
    else:
        warn(f"{size.name}: {column} is {current} from {','.join(size.facts)} but {value} from {origin}; keeping {current}")


def apply_docs_facts(catalog: Catalog, path: Path) -> str:
    rows = read_overlay(path, DOCS_FACTS_COLUMNS)
    unknown = []
    for number, row in rows:
        validate_docs_row(path, number, row)
        size = catalog.sizes.get(row["name"])
        if size is None:
            unknown.append(row["name"])
            continue
        tag, origin = f"docs:{page_slug(row['source'])}", f"{path.name}:{number}"
        for column in ("temp_disk_gib", *BOOLEAN_FIELDS, "gpus", "gpu_model"):
            # The temp storage a page lists for a size whose local disks are NVMe (apply_platform)
            # is those disks.
            target = "nvme_gib" if column == "temp_disk_gib" and size.get("local_disk") == "nvme" else column
            fill(size, target, row[column], tag, origin)
    if unknown:
        warn(f"{path}: {len(unknown)} rows name sizes the catalog lacks: {' '.join(unknown[:10])}")
    return overlay_source(path, rows, "temp disk, RDMA, accelerated networking, premium IO, GPUs")


def apply_naming(catalog: Catalog) -> None:
    for size in catalog.sizes.values():
        for column, value in naming_facts(size.name).items():
            if column == "gpu_model" and size.get("gpus") in ("", "0"):
                continue
            fill(size, column, value, "naming", "the naming convention")


def sizes_matching(catalog: Catalog, where: str, text: str) -> list:
    """The sizes an overlay row's pattern matches (full match, case-insensitive, as ARM compares
    names); one that matches none is reported, a pattern that is not a regex is an error."""
    try:
        pattern = re.compile(text, re.IGNORECASE)
    except re.error as e:
        raise InputError(f"{where}: pattern is not a valid regular expression: {e}") from None
    matched = [s for s in catalog.sizes.values() if pattern.fullmatch(s.name)]
    if not matched:
        warn(f"{where}: pattern {text} matches no size in the catalog")
    return matched


def apply_retirements(catalog: Catalog, path: Path) -> str:
    rows = read_overlay(path, RETIREMENT_COLUMNS)
    for number, row in rows:
        try:
            datetime.date.fromisoformat(row["retirement_date"])
        except ValueError:
            raise InputError(f"{path}:{number}: retirement_date must be a YYYY-MM-DD date") from None
        matched = sizes_matching(catalog, f"{path}:{number}", row["pattern"])
        tag = f"retire:{page_slug(row['source']).removesuffix('-retirement')}"
        for size in matched:
            fill(size, "retirement_date", row["retirement_date"], tag, f"{path.name}:{number}")
    return overlay_source(path, rows, "retirement dates by size-name pattern")


def apply_platform(catalog: Catalog, path: Path) -> str:
    """CPU architecture, Trusted Launch support and NVMe local storage by size-name pattern.

    A size matched by several rows takes each fact from the first row that states it, so a
    specific row (one size) goes above the series row it refines. `local_disk = nvme` says that
    the temp storage the size's page lists is raw NVMe (the v6 and newer `d` sizes); the derived
    values are written by `finish_sizes`.
    """
    rows = read_overlay(path, PLATFORM_COLUMNS)
    stated: set = set()  # (size, column) already stated by an earlier row
    for number, row in rows:
        where = f"{path}:{number}"
        if row["cpu_architecture"] not in ("", *CPU_ARCHITECTURES):
            raise InputError(f"{where}: cpu_architecture must be {' or '.join(CPU_ARCHITECTURES)} or empty")
        if row["trusted_launch"] not in ("", "true", "false"):
            raise InputError(f"{where}: trusted_launch must be true, false or empty")
        if row["local_disk"] not in ("", "nvme"):
            raise InputError(f"{where}: local_disk must be nvme or empty")
        if not row["source"].startswith("https://"):
            raise InputError(f"{where}: source must be the page's https URL")
        matched = sizes_matching(catalog, where, row["pattern"])
        tag = f"platform:{page_slug(row['source'])}"
        for size in matched:
            for column in ("cpu_architecture", "trusted_launch", "local_disk"):
                if row[column] and (size.name, column) not in stated:
                    stated.add((size.name, column))
                    if column == "local_disk":
                        size.values["local_disk"] = row[column]
                        size.tag(tag)
                    else:
                        fill(size, column, row[column], tag, f"{path.name}:{number}")
    return overlay_source(path, rows, "CPU architecture, Trusted Launch support, NVMe local disks by size-name pattern")


def refresh(args) -> Catalog:
    """The shipped catalog as the primary source (`refresh` mode)."""
    source_dir = Path(args.source_dir)

    def rows(name: str, columns: list[str]) -> tuple[list[str], list[dict]]:
        path = source_dir / name
        if not path.exists():
            raise InputError(f"{path}: missing; refresh reads the shipped catalog")
        lines = path.read_text().splitlines()
        comments = [line[2:] for line in lines if line.startswith("# ")]
        table = list(csv.DictReader(line for line in lines if not line.startswith("#")))
        # Columns added since the file was written are read as unknown.
        missing = [c for c in columns if table and c not in table[0] and c in ("cpu_architecture", "trusted_launch", "temp_nvme", "nvme_gib")]
        unknown = [c for c in (table[0] if table else {}) if c not in columns]
        if unknown:
            raise InputError(f"{path}:header: columns {', '.join(unknown)} are not in this generator's schema")
        for row in table:
            for column in missing:
                row[column] = ""
        return comments, table

    size_comments, size_rows = rows("vm-sizes.csv", SIZE_COLUMNS)
    price_comments, price_rows = rows("vm-prices.csv", PRICE_COLUMNS)

    def comment(key: str) -> str:
        return next((c.split(": ", 1)[1] for c in size_comments if c.startswith(f"{key}: ")), "")

    # The overlays' and the naming convention's lines are written again by this run.
    overlay_files = tuple(label(Path(f)) + " (" for f in (args.docs_facts, args.retirements, args.platform))
    overlay_files += ("Azure VM naming conventions",)
    sources = [c.split(": ", 1)[1] for c in size_comments
               if c.startswith("source: ") and not c.split(": ", 1)[1].startswith(overlay_files)]
    sizes = {}
    for row in size_rows:
        facts = [f for f in row.pop("facts").split(";") if f]
        name = row.pop("name")
        sizes[name] = Size(name, {k: v for k, v in row.items() if v}, facts)
    prices = {(r["name"], r["region"]): (r["linux_payg"], r["spot"]) for r in price_rows}
    prices_date = next((c.split(": ", 1)[1] for c in price_comments if c.startswith("prices-date: ")), "")
    catalog = Catalog(sizes, prices, sources, prices_date, comment("mode") or "refresh")
    catalog.notes.append(f"refresh: {len(sizes)} sizes and {len(prices)} prices read from {label(source_dir)} "
                         f"(generated {comment('generated')}); overlays applied again")
    return catalog


# Facts every row must have (docs/catalog.md): a size no source gives one of is left out.
REQUIRED = ("vcpus", "vcpus_available", "memory_gib", "gpus", "generations")


def finish_sizes(catalog: Catalog) -> None:
    """Derived and default values, once every source has spoken; incomplete sizes are left out.

    A size without a GPU count (anycloud names no GPU for it and no page row gives one) cannot
    be written without guessing, and the format has no "unknown" count, so it is left out of the
    shipped catalog, reported, and answered by the live Resource SKUs path instead.
    """
    for size in list(catalog.sizes.values()):
        v = size.values
        if not v.get("vcpus_available"):
            v["vcpus_available"] = v.get("vcpus", "")
        if not v.get("gpus") and not is_gpu_family(size.name):
            v["gpus"] = "0"  # only the N families have accelerators
        if v.get("gpus") == "0":
            v.pop("gpu_model", None)
        if v.get("gpu_model"):
            v["gpu_arch"] = gpu_arch(v["gpu_model"])
        if not v.get("cpu_architecture"):
            # Azure's Arm64 sizes (Ampere Altra, Cobalt) all carry the naming convention's `p`.
            v["cpu_architecture"] = "x64"
        if v.get("generations") and "2" not in v["generations"].split():
            # Trusted Launch needs a Generation 2 VM.
            v["trusted_launch"] = "false"
        if v.pop("local_disk", "") == "nvme" or v.get("temp_nvme") == "true":
            # The page's temp storage is raw NVMe disks: Resource SKUs' MaxResourceVolumeMB is 0
            # for these sizes (no resource disk is mounted), the space is NvmeDiskSizeInMiB. A
            # temp disk equal to it is the same disks counted twice (a catalog written before
            # this rule).
            v["temp_nvme"] = "true"
            if v.get("temp_disk_gib", "") in ("", "0", v.get("nvme_gib")):
                v["temp_disk_gib"] = "0"
            else:
                warn(f"{size.name}: local disks are NVMe, yet temp_disk_gib is {v['temp_disk_gib']} and nvme_gib {v.get('nvme_gib', '')}; kept both")
        for column in ("vcpus", "vcpus_available"):
            # Some sources write counts as decimals ("8.0"); the format has integers.
            number = decimal(v.get(column, ""))
            if number is not None and number == number.to_integral_value():
                v[column] = str(int(number))
            else:
                v.pop(column, None)
        missing = [column for column in REQUIRED if not v.get(column)]
        if missing:
            warn(f"{size.name}: no source gives its {', '.join(missing)}; left out of the catalog")
            catalog.left_out.append(size.name)
            del catalog.sizes[size.name]


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
def check_field(name: str, column: str, value: str) -> str:
    if "," in value or "\n" in value:
        raise InputError(f"{name}: {column} {value!r} contains a comma or newline; the CSV has no quoting")
    return value


def write_outputs(catalog: Catalog, out: Path, extra_sources: list[str]) -> tuple[int, int]:
    priced = {name for name, _ in catalog.prices}
    sizes = sorted((s for s in catalog.sizes.values() if s.name in priced), key=lambda s: s.name)
    names = {s.name for s in sizes}
    prices = sorted((k, v) for k, v in catalog.prices.items() if k[0] in names)
    generated = run_date()
    sources = [f"# source: {line}" for line in catalog.sources + extra_sources]
    out.mkdir(parents=True, exist_ok=True)

    lines = [
        "# dsinfra VM size catalog. Generated by scripts/catalog/generate.py; do not edit by hand.",
        f"# generated: {generated}", f"# mode: {catalog.mode}", *sources, ",".join(SIZE_COLUMNS),
    ]
    for size in sizes:
        row = dict(size.values, name=size.name, facts=";".join(size.facts))
        lines.append(",".join(check_field(size.name, c, row.get(c, "")) for c in SIZE_COLUMNS))
    (out / "vm-sizes.csv").write_text("\n".join(lines) + "\n")

    lines = [
        "# dsinfra VM price catalog. Generated by scripts/catalog/generate.py; do not edit by hand.",
        f"# generated: {generated}", f"# prices-date: {catalog.prices_date}",
        f"# mode: {catalog.mode}", *sources, ",".join(PRICE_COLUMNS),
    ]
    for (name, region), (payg, spot) in prices:
        # A spot price equal to pay-as-you-go is "no real spot price" (anycloud's H200 rows).
        if spot and decimal(spot) == decimal(payg):
            spot = ""
        lines.append(",".join((name, region, payg, spot)))
    (out / "vm-prices.csv").write_text("\n".join(lines) + "\n")
    return len(sizes), len(prices)


def summary(catalog: Catalog, out: Path) -> None:
    sizes_path, prices_path = out / "vm-sizes.csv", out / "vm-prices.csv"
    rows = [r for r in csv.DictReader(l for l in sizes_path.read_text().splitlines() if not l.startswith("# "))]
    price_rows = [r for r in csv.DictReader(l for l in prices_path.read_text().splitlines() if not l.startswith("# "))]
    regions = {r["region"] for r in price_rows}
    gpu_rows = [r for r in rows if r["gpus"] not in ("", "0")]
    print(f"{sizes_path}: {len(rows)} sizes, {sizes_path.stat().st_size} bytes")
    print(f"{prices_path}: {len(price_rows)} rows, {len(regions)} regions, "
          f"{sum(1 for r in price_rows if r['spot'])} with a spot price, {prices_path.stat().st_size} bytes")
    print(f"GPU sizes: {len(gpu_rows)} ({sum(1 for r in gpu_rows if r['gpu_model'])} with a model, "
          f"{sum(1 for r in gpu_rows if r['gpu_arch'])} with an architecture)")
    print("sizes with each fact known:")
    for column in ("vcpus", "memory_gib", "gpus", "temp_disk_gib", "quota_family", "generations",
                   *BOOLEAN_FIELDS, "cpu_architecture", "trusted_launch", "temp_nvme", "nvme_gib", "retirement_date"):
        known = sum(1 for r in rows if r[column] != "")
        extra = ""
        if column in (*BOOLEAN_FIELDS, "trusted_launch", "temp_nvme"):
            extra = f" (true {sum(1 for r in rows if r[column] == 'true')})"
        elif column == "cpu_architecture":
            extra = f" (Arm64 {sum(1 for r in rows if r[column] == 'Arm64')})"
        print(f"  {column:24} {known:5} of {len(rows)}{extra}")
    if catalog.left_out:
        print(f"left out for a missing required fact: {len(catalog.left_out)} sizes: {' '.join(sorted(catalog.left_out))}")
    for note in catalog.notes:
        print(note)


def main(argv: list[str] | None = None) -> int:
    # The output and overlay options are the same for both modes and go after the mode's name.
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--out", metavar="DIR", default=str(REPO / "data/catalog"),
                        help="where vm-sizes.csv and vm-prices.csv are written (default: data/catalog)")
    shared.add_argument("--docs-facts", metavar="F", default=str(REPO / "data/catalog/sources/docs-facts.csv"),
                        help="per-size facts from Microsoft's size pages (default: data/catalog/sources/docs-facts.csv)")
    shared.add_argument("--platform", metavar="F", default=str(REPO / "data/catalog/sources/platform-facts.csv"),
                        help="CPU architecture, Trusted Launch, NVMe by name pattern (default: data/catalog/sources/platform-facts.csv)")
    shared.add_argument("--retirements", metavar="F", default=str(REPO / "data/catalog/sources/retirements.csv"),
                        help="retirement dates by name pattern (default: data/catalog/sources/retirements.csv)")
    parser = argparse.ArgumentParser(
        prog="generate.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    modes = parser.add_subparsers(dest="mode", required=True, metavar="MODE")
    boot = modes.add_parser(
        "bootstrap", parents=[shared], help="offline, from downloaded source files",
        description="Build the catalog offline from anycloud's and karpenter's files "
                    "(docs/catalog.md says where each one comes from).",
    )
    boot.add_argument("--anycloud", required=True, metavar="F", help="anycloud-sh/catalog azure/vms.csv")
    boot.add_argument("--known-skus", required=True, metavar="F", help="karpenter known_skus.yaml (quota family)")
    boot.add_argument("--karpenter-prices", metavar="F",
                      help="karpenter zz_generated.pricing.go or its CSV: cross-check only, never shipped")
    boot.add_argument("--prices-date", metavar="YYYY-MM-DD",
                      help="when the anycloud prices were read (known for the recorded file)")
    again = modes.add_parser(
        "refresh", parents=[shared], help="re-apply the overlays to the shipped catalog",
        description="Read the shipped vm-sizes.csv and vm-prices.csv as the primary source and "
                    "apply the overlays again: how a change to data/catalog/sources/ reaches the "
                    "catalog without the bootstrap inputs or a login. Facts the shipped rows "
                    "state win over the overlays, as they would in the mode that made them.",
    )
    again.add_argument("--from", dest="source_dir", metavar="DIR", default=str(REPO / "data/catalog"),
                       help="where the shipped vm-sizes.csv and vm-prices.csv are read (default: data/catalog)")
    live = modes.add_parser(
        "online", parents=[shared], help="from the Retail Prices and Resource SKUs APIs",
        description="Build the catalog from Microsoft's APIs. Resource SKUs needs a subscription "
                    "and a token (AZURE_ACCESS_TOKEN, else `az account get-access-token`).",
    )
    live.add_argument("--subscription", metavar="ID",
                      help="subscription for Resource SKUs (default: AZURE_SUBSCRIPTION_ID, else `az account show`)")
    live.add_argument("--regions", metavar="R1,R2",
                      help="only these regions (default: every public location Resource SKUs lists)")
    live.add_argument("--prices-url", metavar="URL", default=online_mode.PRICES_URL,
                      help=f"Retail Prices base URL (default {online_mode.PRICES_URL}; tests serve fixtures)")
    live.add_argument("--arm-url", metavar="URL", default=online_mode.ARM_URL,
                      help=f"ARM base URL (default {online_mode.ARM_URL}; tests serve fixtures)")
    args = parser.parse_args(argv)

    try:
        mode = {"bootstrap": bootstrap_mode.bootstrap, "online": online_mode.online,
                "refresh": refresh}[args.mode]
        catalog = mode(args)
        docs_path, retire_path = Path(args.docs_facts), Path(args.retirements)
        platform_path = Path(args.platform)
        platform_source = apply_platform(catalog, platform_path)
        docs_source = apply_docs_facts(catalog, docs_path)
        apply_naming(catalog)
        retire_source = apply_retirements(catalog, retire_path)
        finish_sizes(catalog)
        extra = [
            docs_source,
            retire_source,
            platform_source,
            "Azure VM naming conventions (r = RDMA capable, s = premium storage capable, "
            "p = Arm-based processor, -N = constrained vCPUs, _H100_ = accelerator), "
            "https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions, "
            "licence: Microsoft's documentation, no text copied",
        ]
        out = Path(args.out)
        write_outputs(catalog, out, extra)
        summary(catalog, out)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
