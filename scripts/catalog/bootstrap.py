"""Bootstrap mode: the catalog from files on disk (anycloud's azure/vms.csv, karpenter's
known_skus.yaml), with karpenter's prices as a cross-check that is never shipped."""

from __future__ import annotations

import csv
import re
from decimal import Decimal
from pathlib import Path

from common import Catalog, InputError, Size, decimal, plain_decimal, same_value, source_line, warn

ANYCLOUD_HEADER = [
    "InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo",
    "Price", "SpotPrice", "Region", "Generation",
]


def read_anycloud(path: Path) -> tuple[dict, dict]:
    """Sizes and prices from SkyPilot's azure/vms.csv schema.

    The Generation column (`V1,V2`) is written unquoted, so a row can have 11 fields: the
    generation is everything from the tenth field on.
    """
    sizes, prices = {}, {}
    with path.open(newline="") as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split(",") != ANYCLOUD_HEADER:
        raise InputError(f"{path}:1: expected the header {','.join(ANYCLOUD_HEADER)}")
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(",")
        if len(fields) < 10:
            raise InputError(f"{path}:{number}: {len(fields)} fields, expected 10 or more")
        name, acc_name, acc_count, vcpus, memory, _, price, spot, region = fields[:9]
        generations = " ".join(g.strip().lstrip("V") for g in fields[9:] if g.strip())
        if decimal(vcpus) is None or decimal(memory) is None or decimal(price) is None:
            raise InputError(f"{path}:{number}: vCPUs, MemoryGiB and Price must be numbers")
        row = {
            "vcpus": vcpus, "memory_gib": memory, "generations": generations,
        }
        # SkyPilot's fetcher names the accelerator only for GPU families it knows (NP FPGAs and
        # newer GPUs have none); a count without a name is not a GPU fact.
        if acc_name:
            row["gpus"] = acc_count
            row["gpu_model"] = acc_name
        size = sizes.get(name)
        if size is None:
            size = sizes[name] = Size(name, dict(row), ["anycloud"])
        else:
            for column, value in row.items():
                if not same_value(column, size.get(column), value):
                    warn(f"{path}:{number}: {name} {column} {value} differs from an earlier row's {size.get(column)}; keeping the first")
        if decimal(price) is None or decimal(price) <= 0:
            continue
        if (name, region.lower()) in prices:
            raise InputError(f"{path}:{number}: {name} in {region} is listed twice")
        if spot and decimal(spot) is None:
            raise InputError(f"{path}:{number}: SpotPrice {spot!r} is not a number")
        # A zero spot price is no spot price.
        spot = plain_decimal(spot) if spot and decimal(spot) > 0 else ""
        prices[(name, region.lower())] = (plain_decimal(price), spot)
    return sizes, prices


def read_known_skus(path: Path) -> dict:
    """name -> quota family from karpenter's known_skus.yaml (a flat list of name/family maps)."""
    families, name = {}, None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("- name:"):
            name = stripped.split(":", 1)[1].strip().strip('"')
        elif stripped.startswith("family:"):
            if name is None:
                raise InputError(f"{path}:{number}: `family:` before any `- name:`")
            families[name] = stripped.split(":", 1)[1].strip().strip('"')
    if not families:
        raise InputError(f"{path}: no `- name:` / `family:` entries found")
    return families


def read_karpenter_prices(path: Path) -> dict:
    """(name, region) -> price from karpenter's generated Go map, or from a CSV made from it."""
    prices = {}
    text = path.read_text()
    if path.suffix == ".go":
        region = None
        for line in text.splitlines():
            if m := re.search(r'initialOnDemandPrices\["([a-z0-9]+)"\]\s*=', line):
                region = m.group(1)
            elif region and (m := re.match(r'\s*"([^"]+)":\s*([0-9.eE+-]+),', line)):
                prices[(m.group(1), region)] = m.group(2)
    else:
        for row in csv.DictReader(text.splitlines()):
            prices[(row["InstanceType"], row["Region"].lower())] = row["PriceUSDPerHour"]
    return {k: v for k, v in prices.items() if k[0].startswith(("Standard_", "Basic_"))}


def cross_check(prices: dict, sizes: dict, karpenter: dict) -> list[str]:
    """Compare pay-as-you-go prices with karpenter's; the numbers go to the summary and sources."""
    common = [k for k in prices if k in karpenter]
    equal = sum(1 for k in common if decimal(prices[k][0]) == decimal(karpenter[k]))
    higher = [k for k in common if decimal(karpenter[k]) > decimal(prices[k][0])]
    # Karpenter's filter keeps some Windows meters: their price is the Linux one plus Windows'
    # per-vCPU licence (0.046 $/vCPU-hour for most sizes), which this recognises.
    windows = 0
    for k in higher:
        vcpus = decimal(sizes[k[0]].get("vcpus")) if k[0] in sizes else None
        if vcpus:
            per_vcpu = (decimal(karpenter[k]) - decimal(prices[k][0])) / vcpus
            windows += abs(per_vcpu - Decimal("0.046")) <= Decimal("0.0005")
    only_karpenter = {k[0] for k in karpenter if k not in prices} - set(sizes)
    share = f"{100 * equal / len(common):.1f} %" if common else "n/a"
    return [
        f"price cross-check with karpenter: {len(common)} common (size, region) pairs, "
        f"{equal} identical ({share}), {len(common) - equal} differ "
        f"({len(higher)} karpenter higher, {windows} of them by 0.046 $/vCPU-hour = a Windows price)",
        f"karpenter prices {len(only_karpenter)} sizes the catalog lacks (not added: karpenter "
        f"prices are a cross-check only)",
    ]


def bootstrap(args) -> Catalog:
    anycloud, known_skus = Path(args.anycloud), Path(args.known_skus)
    sizes, prices = read_anycloud(anycloud)
    families = read_known_skus(known_skus)
    for size in sizes.values():
        if size.name in families:
            size.values["quota_family"] = families[size.name]
            size.tag("known_skus")
    missing = sorted(n for n in sizes if n not in families)
    if missing:
        warn(f"{len(missing)} sizes have no quota family in {known_skus}: {' '.join(missing[:10])}")
    any_line, any_known = source_line(anycloud, "anycloud-style azure/vms.csv")
    sku_line, _ = source_line(known_skus, "known_skus.yaml")
    sources = [any_line, sku_line]
    prices_date = args.prices_date or (any_known or {}).get("date")
    if not prices_date:
        raise InputError(f"{anycloud}: unknown file, so give --prices-date YYYY-MM-DD (when its prices were read)")
    catalog = Catalog(sizes, prices, sources, prices_date, "bootstrap")
    if args.karpenter_prices:
        path = Path(args.karpenter_prices)
        karpenter = read_karpenter_prices(path)
        notes = cross_check(prices, sizes, karpenter)
        line, _ = source_line(path, "karpenter prices (cross-check only, not shipped)")
        sources.append(f"{line}; {notes[0].split(': ', 1)[1]}")
        catalog.notes.extend(notes)
    return catalog
