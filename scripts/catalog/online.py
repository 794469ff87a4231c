"""Online mode: the catalog from Microsoft's APIs, the Retail Prices API (anonymous) for Linux
prices and Resource SKUs (a subscription and a token) for capabilities and quota families."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from decimal import Decimal

from common import Catalog, InputError, Size, decimal, plain_decimal, run_date, warn

PRICES_URL = "https://prices.azure.com"
ARM_URL = "https://management.azure.com"
SKUS_API_VERSION = "2021-07-01"
# Microsoft's public pages for the two APIs, cited in the `# source:` lines of an online run.
PRICES_DOC = "https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices"
SKUS_DOC = "https://learn.microsoft.com/rest/api/compute/resource-skus/list"


def get_json(url: str, token: str | None = None) -> dict:
    """GET a JSON document, retrying throttling and server errors with backoff.

    Numbers are kept as their JSON text (`parse_float=str`) so prices are written exactly as
    Microsoft sent them, never re-formatted through a float.
    """
    headers = {"Accept": "application/json", "User-Agent": "dsinfra-catalog-generator"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for attempt in range(6):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
                return json.loads(r.read(), parse_float=str, parse_int=str)
        except urllib.error.HTTPError as e:
            if e.code not in (429, 500, 502, 503, 504) or attempt == 5:
                body = e.read().decode(errors="replace")[:300]
                raise InputError(f"GET {url.split('?')[0]}: HTTP {e.code}: {body}") from None
            wait = e.headers.get("Retry-After")
            time.sleep(min(float(wait) if wait and wait.isdigit() else 2 ** attempt, 60))
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if attempt == 5:
                raise InputError(f"GET {url.split('?')[0]}: {getattr(e, 'reason', e)}") from None
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def linux_price_kind(item: dict) -> str | None:
    """'payg', 'spot' or None (not a Linux hourly VM price we keep), per one Retail Prices item."""
    name, product = item.get("armSkuName", ""), item.get("productName", "")
    sku, meter = item.get("skuName", ""), item.get("meterName", "")
    if not name.startswith(("Standard_", "Basic_")):
        return None  # dedicated hosts (`Dadsv5_Type1`) and other non-size meters
    if item.get("type", "Consumption") != "Consumption" or item.get("currencyCode", "USD") != "USD":
        return None
    if item.get("unitOfMeasure", "1 Hour") != "1 Hour":
        return None
    # " Win" catches the Windows products whose name does not end in " Windows" ("...Srs Win").
    if any(s in product for s in (" Windows", " Win", "Cloud Services", "CloudServices")):
        return None
    if sku.endswith(" Low Priority") or meter.endswith(" Low Priority"):
        return None
    if (decimal(item.get("unitPrice", "0")) or 0) <= 0:
        return None
    return "spot" if sku.endswith(" Spot") else "payg"


def fetch_prices(base: str, regions: list[str]) -> dict:
    """(name, region) -> (payg, spot) from the Retail Prices API, one paged query per region."""
    # (name, region, kind) -> (rank, price). The API also returns non-primary meters for a
    # region; a primary meter wins, then the latest effectiveStartDate.
    latest = {}
    for region in regions:
        query = (
            "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
            f"and currencyCode eq 'USD' and armRegionName eq '{region}'"
        )
        url = f"{base}/api/retail/prices?" + urllib.parse.urlencode({"$filter": query})
        pages = 0
        while url:
            page = get_json(url)
            pages += 1
            for item in page.get("Items", []):
                kind = linux_price_kind(item)
                if kind is None:
                    continue
                key = (item["armSkuName"], item.get("armRegionName", region).lower(), kind)
                rank = (item.get("isPrimaryMeterRegion") is not False, item.get("effectiveStartDate", ""))
                if key not in latest or rank > latest[key][0]:
                    latest[key] = (rank, plain_decimal(item["unitPrice"]))
            url = page.get("NextPageLink")
        print(f"prices: {region}: {pages} pages", file=sys.stderr)
    prices = {}
    for (name, region, kind), (_, price) in latest.items():
        if kind == "payg":
            spot = latest.get((name, region, "spot"), ("", ""))[1]
            prices[(name, region)] = (price, spot)
    return prices


def access_token() -> str:
    token = os.environ.get("AZURE_ACCESS_TOKEN")
    if token:
        return token
    try:
        out = subprocess.run(
            ["az", "account", "get-access-token", "--resource", "https://management.azure.com/",
             "--query", "accessToken", "-o", "tsv"],
            check=True, capture_output=True, text=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        raise InputError(f"no token: set AZURE_ACCESS_TOKEN or log in with `az login` ({e})") from None
    return out.stdout.strip()


def default_subscription() -> str:
    if os.environ.get("AZURE_SUBSCRIPTION_ID"):
        return os.environ["AZURE_SUBSCRIPTION_ID"]
    try:
        out = subprocess.run(["az", "account", "show", "--query", "id", "-o", "tsv"],
                             check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        raise InputError("no subscription: give --subscription ID or set AZURE_SUBSCRIPTION_ID") from None
    return out.stdout.strip()


def fetch_skus(base: str, subscription: str, token: str) -> list[dict]:
    url = (f"{base}/subscriptions/{subscription}/providers/Microsoft.Compute/skus"
           f"?api-version={SKUS_API_VERSION}")
    records = []
    while url:
        page = get_json(url, token)
        records.extend(r for r in page.get("value", []) if r.get("resourceType") == "virtualMachines")
        url = page.get("nextLink")
    return records


def yes_no(value: str) -> str:
    return {"true": "true", "false": "false"}.get(value.lower(), "")


def sku_size(name: str, records: list[dict]) -> tuple[Size, set]:
    """One Size from a size's Resource SKU records (usually one per location).

    Capabilities are the same in every location for nearly every size; where they are not, the
    most common value wins (ties: the smallest text), so the result does not depend on order.
    """
    locations, capabilities = set(), {}
    family = sorted(r.get("family", "") for r in records)[0]
    for record in records:
        locations.update(loc.lower() for loc in record.get("locations", []))
        for cap in record.get("capabilities", []):
            capabilities.setdefault(cap["name"], []).append(str(cap["value"]))

    def cap(key: str) -> str:
        values = capabilities.get(key)
        if not values:
            return ""
        return sorted(set(values), key=lambda v: (-values.count(v), v))[0]

    values = {
        "vcpus": cap("vCPUs"),
        "vcpus_available": cap("vCPUsAvailable"),
        "memory_gib": cap("MemoryGB"),
        # Resource SKUs has a GPUs capability only on sizes with GPUs.
        "gpus": cap("GPUs") or "0",
        "quota_family": family,
        "generations": " ".join(g.strip().lstrip("V") for g in cap("HyperVGenerations").split(",") if g.strip()),
        "rdma": yes_no(cap("RdmaEnabled")),
        "accelerated_networking": yes_no(cap("AcceleratedNetworkingEnabled")),
        "premium_io": yes_no(cap("PremiumIO")),
    }
    architecture = {"x64": "x64", "arm64": "Arm64"}.get(cap("CpuArchitectureType").lower(), "")
    if architecture:
        values["cpu_architecture"] = architecture
    # Resource SKUs marks the sizes that refuse Trusted Launch (`TrustedLaunchDisabled: True`)
    # and, as far as the answers seen show, says nothing on the others; a Generation 2 size
    # without the mark is taken to support it (docs/decisions.md 61).
    disabled = yes_no(cap("TrustedLaunchDisabled"))
    if disabled:
        values["trusted_launch"] = "false" if disabled == "true" else "true"
    elif "2" in values["generations"].split():
        values["trusted_launch"] = "true"
    if cap("NvmeDiskSizeInMiB") and Decimal(cap("NvmeDiskSizeInMiB")) > 0:
        values["nvme_gib"] = str(round(Decimal(cap("NvmeDiskSizeInMiB")) / 1024))
        if cap("MaxResourceVolumeMB") in ("", "0"):
            values["temp_nvme"] = "true"
    if cap("MaxResourceVolumeMB"):
        values["temp_disk_gib"] = str(round(Decimal(cap("MaxResourceVolumeMB")) / 1024))
    retirement = cap("RetirementDateUtc")  # "09/03/2024": month/day/year
    if m := re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})(?: .*)?", retirement):
        values["retirement_date"] = f"{m[3]}-{int(m[1]):02d}-{int(m[2]):02d}"
    elif retirement:
        warn(f"{name}: RetirementDateUtc {retirement!r} is not month/day/year; ignored")
    return Size(name, {k: v for k, v in values.items() if v != ""}, ["skus"]), locations


def online(args) -> Catalog:
    subscription = args.subscription or default_subscription()
    token = access_token()
    today = run_date()
    records = fetch_skus(args.arm_url.rstrip("/"), subscription, token)
    by_name = {}
    for record in records:
        by_name.setdefault(record["name"], []).append(record)
    sizes, offered = {}, {}  # name -> Size; name -> the locations Resource SKUs lists it in
    for name, group in by_name.items():
        sizes[name], offered[name] = sku_size(name, group)
    if args.regions:
        regions = sorted({r.strip().lower() for r in args.regions.split(",") if r.strip()})
        for region in regions:
            if not re.fullmatch(r"[a-z0-9]+", region):
                raise InputError(f"--regions: {region!r} is not an ARM location name (eastus, westeurope)")
    else:
        # Early-access (euap) and staging locations have no public prices.
        regions = sorted({loc for locs in offered.values() for loc in locs
                          if not loc.endswith(("euap", "stg"))})
    all_prices = fetch_prices(args.prices_url.rstrip("/"), regions)
    # A (size, region) row means Azure offers the size there: priced, and listed by Resource SKUs
    # in that location. A restriction (NotAvailableForSubscription) is this subscription's, not
    # Azure's offer, so it removes nothing; the live path reads restrictions.
    prices = {k: v for k, v in all_prices.items() if k[0] in sizes and k[1] in offered[k[0]]}
    unlisted_names = len({k[0] for k in all_prices} - set(sizes))
    not_listed = sum(1 for k in all_prices if k[0] in sizes and k[1] not in offered[k[0]])
    priced = {name for name, _ in prices}
    sizes = {name: size for name, size in sizes.items() if name in priced}
    sources = [
        f"Azure Retail Prices API (Linux pay-as-you-go and spot, USD), {PRICES_DOC}, read {today}, "
        f"licence: facts published by Microsoft",
        f"Azure Resource SKUs API {SKUS_API_VERSION} (capabilities, quota family, locations), "
        f"{SKUS_DOC}, read {today}, licence: facts published by Microsoft",
    ]
    catalog = Catalog(sizes, prices, sources, today, "online")
    catalog.notes.append(
        f"online: {len(records)} Resource SKU records, {len(regions)} regions queried; "
        f"{unlisted_names} priced names without a Resource SKU and {not_listed} priced "
        f"(size, region) pairs Resource SKUs does not list were left out"
    )
    return catalog
