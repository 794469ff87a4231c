"""What both modes of generate.py share: the catalog's columns, one size's row, value helpers,
the naming-convention facts, and the provenance of the input files this project knows."""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SIZE_COLUMNS = [
    "name", "vcpus", "vcpus_available", "memory_gib", "gpus", "gpu_model", "gpu_arch",
    "temp_disk_gib", "quota_family", "generations", "rdma", "accelerated_networking",
    "premium_io", "cpu_architecture", "trusted_launch", "temp_nvme", "nvme_gib", "retirement_date",
    "facts",
]
PRICE_COLUMNS = ["name", "region", "linux_payg", "spot"]
DOCS_FACTS_COLUMNS = [
    "name", "temp_disk_gib", "rdma", "accelerated_networking", "premium_io", "gpus", "gpu_model",
    "source",
]
RETIREMENT_COLUMNS = ["pattern", "retirement_date", "source"]
PLATFORM_COLUMNS = ["pattern", "cpu_architecture", "trusted_launch", "local_disk", "source"]
CPU_ARCHITECTURES = ("x64", "Arm64")

# GPU model -> architecture. The model's base name (before any "-80GB"/"-NVL" suffix) is looked
# up; AMD Instinct parts are all "MI<n>".
GPU_ARCH = {
    "K80": "Kepler", "M60": "Maxwell", "P40": "Pascal", "P100": "Pascal", "V100": "Volta",
    "T4": "Turing", "A10": "Ampere", "A100": "Ampere", "L4": "Ada", "L40": "Ada", "L40S": "Ada",
    "H100": "Hopper", "H200": "Hopper", "GB200": "Blackwell", "V620": "AMD", "V710": "AMD",
}

# Provenance of the input files this script knows, by sha256, so the `# source:` lines name the
# repository, commit, date and licence of exactly the bytes that were read. Another file still
# works; its line then says that its provenance is unknown.
KNOWN_INPUTS = {
    "5f60a693a9ac66cd956054ab9bce80e3d7ca905ebe198f09b2d1e6988db4f628": {
        "what": "anycloud-sh/catalog azure/vms.csv (sizes, vCPUs, memory, GPUs, generations, "
                "Linux pay-as-you-go and spot prices per region)",
        "url": "https://github.com/anycloud-sh/catalog/blob/62ff0a987e0c257a89235415d2877812fb1aaf29/azure/vms.csv",
        "commit": "62ff0a987e0c257a89235415d2877812fb1aaf29",
        "date": "2026-05-20",
        "licence": "none declared (facts from Microsoft's Retail Prices and Resource SKUs APIs; "
                   "regenerate with `online` to depend on Microsoft only)",
    },
    "8fa8b0eedc6c8ebf89940e7d03726cbbee2f22baf7cba73d6622139e46ccfe0e": {
        "what": "Azure/karpenter-provider-azure pkg/providers/instancetype/known_skus.yaml (quota family)",
        "url": "https://github.com/Azure/karpenter-provider-azure/blob/352646f599290c3a6d2f9710fb535a7b288f88ed/pkg/providers/instancetype/known_skus.yaml",
        "commit": "352646f599290c3a6d2f9710fb535a7b288f88ed (file last changed 2b431da1)",
        "date": "2026-07-16",
        "licence": "Apache-2.0 (Microsoft)",
    },
    "8f3b8e024f208ceea48bb55a36d7e554aeb9e268422bbf70b5ebd4efaf68b9d9": {
        "what": "Azure/karpenter-provider-azure pkg/providers/pricing/zz_generated.pricing.go "
                "(on-demand prices; cross-check only, not shipped)",
        "url": "https://github.com/Azure/karpenter-provider-azure/blob/352646f599290c3a6d2f9710fb535a7b288f88ed/pkg/providers/pricing/zz_generated.pricing.go",
        "commit": "352646f599290c3a6d2f9710fb535a7b288f88ed (file last changed 2b431da1)",
        "date": "2026-06-18",
        "licence": "Apache-2.0 (Microsoft)",
    },
}
# A size name split per Azure's naming convention
# (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions):
# [Family][Subfamily] [#vCPUs] [-#constrained vCPUs] [additive features] [_accelerator] [_version].
# Family letters are upper case, additive features lower case.
NAME_PARTS = re.compile(
    r"(?:Standard|Basic)_(?P<family>[A-Z]+)(?P<vcpus>\d+)(?:-(?P<constrained>\d+))?"
    r"(?P<features>[a-z]*)(?P<rest>_.*)?"
)
# The accelerator part of a name (`_H100_`, `_A10_`, `_MI300X_`, the `GB200` of `_NDR_GB200_`):
# upper-case letters then a digit, which the version (`_v5`) and `NDR` are not.
ACCELERATOR_TOKEN = re.compile(r"^[A-Z]+[0-9][A-Z0-9]*$")

BOOLEAN_FIELDS = ("rdma", "accelerated_networking", "premium_io")


class InputError(Exception):
    """Bad input data: the message names the file and line and says what to fix."""


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


@dataclass
class Size:
    """One row of vm-sizes.csv; every value is the text written ('' = not known)."""

    name: str
    values: dict = field(default_factory=dict)
    facts: list = field(default_factory=list)

    def get(self, column: str) -> str:
        return self.values.get(column, "")

    def tag(self, tag: str) -> None:
        if tag not in self.facts:
            self.facts.append(tag)


@dataclass
class Catalog:
    """What a mode read from its primary sources, before the overlays."""

    sizes: dict  # name -> Size
    prices: dict  # (name, region) -> (linux_payg text, spot text or '')
    sources: list  # `# source:` lines
    prices_date: str
    mode: str
    notes: list = field(default_factory=list)  # extra summary lines (cross-check, drops)
    left_out: list = field(default_factory=list)  # sizes without a required fact


def decimal(text: str) -> Decimal | None:
    """The number a text says, or None; compared as Decimal so 0.46 and 0.460 are equal."""
    try:
        return Decimal(text)
    except (InvalidOperation, TypeError):
        return None


def plain_decimal(text: str) -> str:
    """The source's decimal text, except that exponent notation (`6.9E-05`) is written out."""
    if "e" in text.lower():
        return format(Decimal(text), "f")
    return text


def same_value(column: str, a: str, b: str) -> bool:
    """Whether two sources say the same: numbers by value, names and booleans by case-folded text."""
    if column in ("gpu_model", "quota_family", "cpu_architecture", "trusted_launch", "temp_nvme") or column in BOOLEAN_FIELDS:
        return a.lower() == b.lower()
    da, db = decimal(a), decimal(b)
    if da is not None and db is not None:
        return da == db
    return a == b


def gpu_arch(model: str) -> str:
    """The architecture of a GPU model, or '' when the table does not know it."""
    base = model.upper().split("-")[0]
    if base.startswith("MI") or base.startswith("RADEON"):
        return "AMD"
    return GPU_ARCH.get(base, "")


def name_parts(name: str):
    """The regex match of a size name's parts (NAME_PARTS), or None for names outside the convention."""
    return NAME_PARTS.fullmatch(name)


def naming_facts(name: str) -> dict:
    """Facts Azure's naming convention documents, for names that follow it.

    https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions lists the additive
    feature letters: `r` = RDMA capable, `s` = Premium Storage capable; the DS and GS families
    are the premium-storage variants of D and G. The convention says what a letter means, not
    what its absence means, so only the positive facts are taken from it. A constrained-vCPU
    size (`HB176-144rs_v4`, https://learn.microsoft.com/azure/virtual-machines/constrained-vcpu)
    has the active vCPU count after the dash. The accelerator part (`_H100_`) names the GPU.
    """
    parts = name_parts(name)
    if not parts:
        return {}
    facts = {}
    features = parts["features"]
    if "r" in features:
        facts["rdma"] = "true"
    if "s" in features or parts["family"] in ("DS", "GS"):
        facts["premium_io"] = "true"
    if "p" in features:
        # `p` = Arm-based processor; the convention's only architecture letter.
        facts["cpu_architecture"] = "Arm64"
    if parts["constrained"]:
        facts["vcpus_available"] = parts["constrained"]
    tokens = (parts["rest"] or "").split("_")[1:]
    accelerators = [t for t in tokens if ACCELERATOR_TOKEN.match(t)]
    if accelerators and gpu_arch(accelerators[-1]):
        facts["gpu_model"] = accelerators[-1]
    return facts


def is_gpu_family(name: str) -> bool:
    """GPU (and FPGA) sizes are the N families (https://learn.microsoft.com/azure/virtual-machines/sizes/overview)."""
    parts = name_parts(name)
    return bool(parts) and parts["family"].startswith("N")


def label(path: Path) -> str:
    """A path as the `# source:` lines show it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return path.name


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_line(path: Path, fallback_what: str) -> tuple[str, dict | None]:
    """The `# source:` text of an input file (its recorded provenance if known) and that record."""
    digest = sha256(path)
    known = KNOWN_INPUTS.get(digest)
    if known:
        line = f"{known['what']}, {known['url']}, commit {known['commit']}, {known['date']}, licence: {known['licence']}"
        return line, known
    warn(f"{path}: not a file this script knows (sha256 {digest}); its `# source:` line says so")
    return f"{fallback_what}, local file {path.name} sha256 {digest}, provenance unknown", None


def run_date() -> str:
    """Today (UTC) as YYYY-MM-DD; SOURCE_DATE_EPOCH (reproducible-builds.org) pins it for tests."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC) if epoch else datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%d")
