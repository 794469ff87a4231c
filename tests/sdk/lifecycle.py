"""One whole lifecycle driven by the official Azure SDK for Python against dsinfra's emulator.

A client nobody in this project wrote is the honest check of "Azure without Azure": every step
below uses the SDK exactly as it is meant to be used against ARM (long-running pollers, pagers,
typed errors) and asserts what ARM would answer. A wrong answer from the emulator fails its step.

Run by tests/sdk_python.rs with the venv that scripts/test installs:

    python tests/sdk/lifecycle.py --endpoint http://127.0.0.1:PORT --subscription SUB --page-size 2

Each step prints one line, `PASS`, `FAIL` (naming what was expected and what was answered) or
`SKIP` (a step it needs failed), then a summary; the exit code is 1 if any step failed.
"""

import argparse
import concurrent.futures
import datetime
import json
import math
import sys
import time
import traceback

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.core.rest import HttpRequest
from azure.mgmt.authorization import AuthorizationManagementClient
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.machinelearningservices import MachineLearningServicesMgmtClient
from azure.mgmt.machinelearningservices import models as ml_models
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.features import FeatureClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.storage import StorageManagementClient

from aks import AksSteps

# The api-versions dsinfra's emulator is held to (src/azure/api_version.rs, the spec files in
# shared/azure-specs). These SDK releases default to newer versions; the emulator accepts any,
# but the test validates every request and answer against the specs of these versions, so each
# call names its version. Resources (2025-04-01) is already the SDK's default.
COMPUTE = {"api_version": "2024-11-01"}
DISKS = {"api_version": "2025-01-02"}
NETWORK = {"api_version": "2024-07-01"}
STORAGE_API_VERSION = "2025-01-01"
# azure-mgmt-machinelearningservices 1.0.1 was generated for 2020-08-01; its workspace and
# AmlCompute models have the shape 2024-10-01 still has, so the client is called at the version
# dsinfra speaks. Its ClusterUpdateParameters does not (2020-08-01 had one `properties` level, not
# two): that PATCH is sent as the 2024-10-01 body, through the same client and poller.
ML = {"api_version": "2024-10-01"}
# The workspace's dependencies have no client in the pinned SDK: the generic resources client
# creates them by id, at the versions dsinfra uses.
DEPENDENCY_API_VERSIONS = {
    "Microsoft.KeyVault/vaults": "2023-07-01",
    "Microsoft.OperationalInsights/workspaces": "2022-10-01",
    "Microsoft.Insights/components": "2020-02-02",
}
ML_GROUP = "rg-sdk-ml"
ML_ACCOUNT = "sdkmlstore0001"
ML_WORKSPACE = "ws-sdk"
ML_COMPUTE = "gpu-sdk"
ML_NODES = 2

LOCATION = "eastus"
GROUP = "rg-sdk"
OTHER_GROUP = "rg-sdk-other"
EMPTY_GROUP = "rg-sdk-empty"
VMS = ["vm-0", "vm-1", "vm-2"]
DATA_DISK = "data-0"
ACCOUNT = "sdklifecycle0001"


class StaticToken:
    """A TokenCredential that always returns the same token: the emulator accepts any."""

    def __init__(self, token="sdk-lifecycle-token"):
        self.token = token

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self.token, int(time.time()) + 3600)


# A caller the emulator checks (tests/sdk_python.rs: EmulatorConfig::callers): its token and its
# principal, which holds only what the `permissions` step assigns it.
CONTRIBUTOR_TOKEN = "sdk-contributor-token"
CONTRIBUTOR_PRINCIPAL = "5a5a5a5a-1111-4222-8333-944444444444"
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"


class AllowPlainHttp(SansIOHTTPPolicy):
    """Lets the bearer policy send the token to the emulator's http:// endpoint.

    azure-core's BearerTokenCredentialPolicy refuses non-TLS URLs unless the operation is called
    with the documented keyword `enforce_https=False`. This per-call policy runs before the
    authentication policy and passes that keyword for every request, including the pollers' and
    pagers' follow-up requests, instead of repeating it at every call.
    """

    def on_request(self, request):
        request.context.options["enforce_https"] = False


class StepFailed(Exception):
    """A step's check failed; the message says what was expected and what was answered."""


def expect(what, expected, answered):
    if expected != answered:
        raise StepFailed(f"{what}: expected {expected!r}, answered {answered!r}")


def expect_true(what, condition, answered):
    if not condition:
        raise StepFailed(f"{what}; answered {answered!r}")


def describe(error):
    code = error.error.code if error.error else None
    message = error.error.message if error.error else error.message
    return f"HTTP {error.status_code} {code}: {message}"


def expect_error(what, call, statuses, code=None):
    """Runs `call`, which must fail with one of `statuses` and (if given) ARM error `code`."""
    try:
        answer = call()
    except HttpResponseError as error:
        answered_code = error.error.code if error.error else None
        if error.status_code not in statuses or (code is not None and answered_code != code):
            wanted = " or ".join(str(s) for s in statuses)
            raise StepFailed(
                f"{what}: expected HTTP {wanted} {code or 'error'}, answered {describe(error)}"
            ) from None
        return error
    raise StepFailed(f"{what}: expected an error {code or statuses}, answered success: {answer!r}")


def same_id(a, b):
    """ARM ids compare case-insensitively (ARM itself changes their case)."""
    return (a or "").lower() == (b or "").lower()


def power_state(compute, group, vm):
    view = compute.virtual_machines.instance_view(group, vm, **COMPUTE)
    codes = [s.code for s in view.statuses or [] if s.code.startswith("PowerState/")]
    return codes[0] if codes else None


def paged(pager):
    """Every item of a pager and the number of pages (answers) it took."""
    items, pages = [], 0
    for page in pager.by_page():
        pages += 1
        items.extend(page)
    return items, pages


def expect_paged(what, pager, expected_names, page_size, exact=True):
    """The pager yields `expected_names` (exactly, or at least them) in pages of `page_size`."""
    items, pages = paged(pager)
    names = sorted(item.name for item in items)
    if exact:
        expect(f"{what}: names", sorted(expected_names), names)
    else:
        missing = sorted(set(expected_names) - set(names))
        expect(f"{what}: names missing from the list", [], missing)
    expect(
        f"{what}: pages of {page_size} for {len(items)} items",
        max(1, math.ceil(len(items) / page_size)),
        pages,
    )
    return items


class Lifecycle:
    """The SDK's clients, the ids the steps share, and the steps in stages (see `stages`)."""

    def __init__(self, endpoint, subscription, page_size):
        self.page_size = page_size
        self.endpoint = endpoint.rstrip("/")
        options = {"base_url": endpoint, "per_call_policies": [AllowPlainHttp()]}
        credential = StaticToken()
        self.resources = ResourceManagementClient(credential, subscription, **options)
        self.compute = ComputeManagementClient(credential, subscription, **options)
        self.network = NetworkManagementClient(credential, subscription, **options)
        self.storage = StorageManagementClient(
            credential, subscription, api_version=STORAGE_API_VERSION, **options
        )
        self.ml = MachineLearningServicesMgmtClient(credential, subscription, **options)
        # Microsoft.Features 2021-07-01 is this client's default.
        self.preview = FeatureClient(credential, subscription, **options).features
        # Microsoft.Authorization 2022-04-01 is this client's default for what is used here.
        self.authorization = AuthorizationManagementClient(credential, subscription, **options)
        # Its own policy list: built on the shared one, its authentication ended up in the
        # other clients' pipelines too (seen: the owner's requests went out with the
        # Contributor's token).
        self.as_contributor = AuthorizationManagementClient(
            StaticToken(CONTRIBUTOR_TOKEN),
            subscription,
            base_url=endpoint,
            per_call_policies=[AllowPlainHttp()],
        )
        self.subscription = subscription
        self.ids = {}
        checks = (expect, expect_true, expect_error, same_id)
        self.aks = AksSteps(credential, subscription, options, self.resources, checks)

    # --- resource groups and network -------------------------------------------------------

    def group(self):
        for name in (GROUP, OTHER_GROUP, EMPTY_GROUP):
            rg = self.resources.resource_groups.create_or_update(name, {"location": LOCATION})
            expect(f"group {name} provisioningState", "Succeeded", rg.properties.provisioning_state)
        expect(
            "check_existence of the group",
            True,
            self.resources.resource_groups.check_existence(GROUP),
        )
        expect("group location", LOCATION, self.resources.resource_groups.get(GROUP).location)

    def network_resources(self):
        net = self.network
        rule = {
            "name": "ssh",
            "properties": {
                "priority": 100,
                "direction": "Inbound",
                "access": "Allow",
                "protocol": "Tcp",
                "sourceAddressPrefix": "*",
                "sourcePortRange": "*",
                "destinationAddressPrefix": "*",
                "destinationPortRange": "22",
            },
        }
        static_ip = {
            "location": LOCATION,
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
        }
        # Started together: each poller polls in its own thread, as a user's script would.
        pollers = {
            "nsg": net.network_security_groups.begin_create_or_update(
                GROUP,
                "nsg",
                {"location": LOCATION, "properties": {"securityRules": [rule]}},
                **NETWORK,
            ),
            "vnet": net.virtual_networks.begin_create_or_update(
                GROUP,
                "vnet",
                {
                    "location": LOCATION,
                    "properties": {
                        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                        "subnets": [
                            {"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}
                        ],
                    },
                },
                **NETWORK,
            ),
            "pip": net.public_ip_addresses.begin_create_or_update(
                GROUP, "pip", static_ip, **NETWORK
            ),
            # One resource in another group, so the subscription-wide list spans groups.
            "pip-other": net.public_ip_addresses.begin_create_or_update(
                OTHER_GROUP, "pip-other", static_ip, **NETWORK
            ),
        }
        made = {name: poller.result() for name, poller in pollers.items()}
        for name, resource in made.items():
            expect(f"{name} provisioningState", "Succeeded", resource.provisioning_state)
        expect("NSG rules", ["ssh"], [r.name for r in made["nsg"].security_rules])
        pip = made["pip"]
        expect_true(
            "a Standard static public IP has its address at creation",
            pip.ip_address,
            pip.ip_address,
        )
        subnet = net.subnets.get(GROUP, "vnet", "default", **NETWORK)
        expect("subnet addressPrefix", "10.0.0.0/24", subnet.address_prefix)
        self.ids.update(subnet=subnet.id, nsg=made["nsg"].id, pip=pip.id)
        nics = [self.begin_nic(f"nic-{i}", public_ip=i == 0) for i in range(len(VMS))]
        for poller in nics:
            nic = poller.result()
            expect(f"NIC {nic.name} provisioningState", "Succeeded", nic.provisioning_state)
            address = nic.ip_configurations[0].private_ip_address or ""
            expect_true(
                f"NIC {nic.name} has a private address from the subnet",
                address.startswith("10.0.0."),
                address,
            )
            self.ids[nic.name] = nic.id

    def begin_nic(self, name, public_ip=False):
        config = {"subnet": {"id": self.ids["subnet"]}}
        if public_ip:
            config["publicIPAddress"] = {"id": self.ids["pip"]}
        return self.network.network_interfaces.begin_create_or_update(
            GROUP,
            name,
            {
                "location": LOCATION,
                "properties": {
                    "networkSecurityGroup": {"id": self.ids["nsg"]},
                    "ipConfigurations": [{"name": "ipconfig1", "properties": config}],
                },
            },
            **NETWORK,
        )

    # --- compute ------------------------------------------------------------------------------

    def vm_body(self, vm, nic):
        return {
            "location": LOCATION,
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D2s_v5"},
                "storageProfile": {
                    "imageReference": {
                        "publisher": "Canonical",
                        "offer": "ubuntu-24_04-lts",
                        "sku": "server",
                        "version": "latest",
                    },
                    "osDisk": {
                        "createOption": "FromImage",
                        "managedDisk": {"storageAccountType": "Premium_LRS"},
                        "deleteOption": "Delete",
                    },
                },
                "osProfile": {
                    "computerName": vm,
                    "adminUsername": "azureuser",
                    "linuxConfiguration": {
                        "disablePasswordAuthentication": True,
                        "ssh": {
                            "publicKeys": [
                                {
                                    "path": "/home/azureuser/.ssh/authorized_keys",
                                    "keyData": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx7 sdk@test",
                                }
                            ]
                        },
                    },
                },
                "networkProfile": {
                    "networkInterfaces": [{"id": self.ids[nic], "properties": {"primary": True}}]
                },
            },
        }

    def vm_create(self):
        """Three VMs at once (three, so that lists of them span pages of two)."""
        vms = self.compute.virtual_machines
        pollers = [
            vms.begin_create_or_update(GROUP, vm, self.vm_body(vm, f"nic-{i}"), **COMPUTE)
            for i, vm in enumerate(VMS)
        ]
        for poller in pollers:
            vm = poller.result()
            expect(f"{vm.name} create poller status", "Succeeded", poller.status())
            expect(f"{vm.name} provisioningState", "Succeeded", vm.provisioning_state)
            expect_true(f"{vm.name} has a vmId", vm.vm_id, vm.vm_id)
            expect(
                f"{vm.name} state after create",
                "PowerState/running",
                power_state(self.compute, GROUP, vm.name),
            )
            self.ids[vm.name] = vm.id

    def disk_create(self):
        disk = self.compute.disks.begin_create_or_update(
            GROUP,
            DATA_DISK,
            {
                "location": LOCATION,
                "sku": {"name": "Premium_LRS"},
                "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 32},
            },
            **DISKS,
        ).result()
        expect("disk provisioningState", "Succeeded", disk.provisioning_state)
        expect("disk size", 32, disk.disk_size_gb)
        expect("disk state", "Unattached", disk.disk_state)
        self.ids[DATA_DISK] = disk.id

    def disk_resize(self):
        disks = self.compute.disks
        grown = disks.begin_update(
            GROUP, DATA_DISK, {"properties": {"diskSizeGB": 64}}, **DISKS
        ).result()
        expect("disk PATCH diskSizeGB 32 -> 64 answer", 64, grown.disk_size_gb)
        expect(
            "disk GET after the PATCH, diskSizeGB",
            64,
            disks.get(GROUP, DATA_DISK, **DISKS).disk_size_gb,
        )
        expect_error(
            "disk PATCH shrinking 64 -> 16",
            lambda: disks.begin_update(
                GROUP, DATA_DISK, {"properties": {"diskSizeGB": 16}}, **DISKS
            ).result(),
            (400, 409),
        )
        expect(
            "disk GET after the refused shrink, diskSizeGB",
            64,
            disks.get(GROUP, DATA_DISK, **DISKS).disk_size_gb,
        )

    def vm_attach_disk(self):
        seen = []
        patch = {
            "properties": {
                "storageProfile": {
                    "dataDisks": [
                        {
                            "lun": 0,
                            "createOption": "Attach",
                            "managedDisk": {"id": self.ids[DATA_DISK]},
                        }
                    ]
                }
            }
        }
        poller = self.compute.virtual_machines.begin_update(
            GROUP,
            VMS[0],
            patch,
            raw_response_hook=lambda response: seen.append(response.http_response),
            **COMPUTE,
        )
        poller.result()
        vm = self.compute.virtual_machines.get(GROUP, VMS[0], **COMPUTE)
        attached = [(d.lun, d.managed_disk.id) for d in vm.storage_profile.data_disks or []]
        expect_true(
            f"VM GET after the PATCH shows {DATA_DISK} at lun 0",
            len(attached) == 1
            and attached[0][0] == 0
            and same_id(attached[0][1], self.ids[DATA_DISK]),
            attached,
        )
        disk = self.compute.disks.get(GROUP, DATA_DISK, **DISKS)
        expect("disk state after the attach", "Attached", disk.disk_state)
        expect_true(
            "disk managedBy is the VM", same_id(disk.managed_by, self.ids[VMS[0]]), disk.managed_by
        )
        first = seen[0] if seen else None
        expect_true(
            "VM PATCH is a long-running operation (Azure-AsyncOperation on its first answer)",
            first is not None and "Azure-AsyncOperation" in first.headers,
            first and f"HTTP {first.status_code} with headers {sorted(first.headers)}",
        )

    def spot(self):
        """Issue 34: a spot VM as the SDK writes one (priority, evictionPolicy,
        billingProfile.maxPrice), simulateEviction (204), and the eviction that follows the
        notice: the VM deallocated. A regular VM with an eviction policy is refused."""
        nic = self.begin_nic("nic-spot").result()
        self.ids["nic-spot"] = nic.id
        vms = self.compute.virtual_machines
        try:
            self.spot_vm(vms)
        finally:
            # Gone before the lists are read, whatever happened.
            try:
                vms.begin_delete(GROUP, "vm-spot", **COMPUTE).result()
            except HttpResponseError:
                pass
            self.network.network_interfaces.begin_delete(GROUP, "nic-spot", **NETWORK).result()

    def spot_vm(self, vms):
        body = self.vm_body("vm-spot", "nic-spot")
        regular = json.loads(json.dumps(body))
        regular["properties"]["evictionPolicy"] = "Deallocate"
        expect_error(
            "an eviction policy on a regular VM",
            lambda: vms.begin_create_or_update(GROUP, "vm-regular", regular, **COMPUTE).result(),
            [400],
            "InvalidParameter",
        )
        body["properties"].update(
            {"priority": "Spot", "evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": -1}}
        )
        vm = vms.begin_create_or_update(GROUP, "vm-spot", body, **COMPUTE).result()
        expect("spot priority", "Spot", vm.priority)
        expect("spot evictionPolicy", "Deallocate", vm.eviction_policy)
        expect("spot maxPrice", -1, vm.billing_profile.max_price)
        vms.simulate_eviction(GROUP, "vm-spot", **COMPUTE)
        deadline = time.monotonic() + 30
        state = power_state(self.compute, GROUP, "vm-spot")
        while state != "PowerState/deallocated" and time.monotonic() < deadline:
            time.sleep(0.5)
            state = power_state(self.compute, GROUP, "vm-spot")
        expect("spot VM after simulateEviction and its notice", "PowerState/deallocated", state)

    def power(self):
        vms = self.compute.virtual_machines
        for action, state in [
            (vms.begin_deallocate, "PowerState/deallocated"),
            (vms.begin_start, "PowerState/running"),
            (vms.begin_restart, "PowerState/running"),
            (vms.begin_power_off, "PowerState/stopped"),
            (vms.begin_start, "PowerState/running"),
        ]:
            # VMS[1]: VMS[0] is being patched meanwhile, and ARM refuses a second operation on a VM.
            action(GROUP, VMS[1], **COMPUTE).result()
            expect(
                f"instance view after {action.__name__}",
                state,
                power_state(self.compute, GROUP, VMS[1]),
            )

    # --- storage ------------------------------------------------------------------------------

    def storage_account(self):
        accounts = self.storage.storage_accounts
        available = accounts.check_name_availability(
            {"name": ACCOUNT, "type": "Microsoft.Storage/storageAccounts"}
        )
        expect("checkNameAvailability of a free name", True, available.name_available)
        account = accounts.begin_create(
            GROUP,
            ACCOUNT,
            {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"},
        ).result()
        expect("storage account provisioningState", "Succeeded", account.provisioning_state)
        expect("storage account kind", "StorageV2", account.kind)
        keys = accounts.list_keys(GROUP, ACCOUNT).keys_property
        expect("listKeys key names", ["key1", "key2"], [k.key_name for k in keys])
        expect(
            "listKeys permissions", ["FULL", "FULL"], [(k.permissions or "").upper() for k in keys]
        )

    def storage_regenerate_key(self):
        accounts = self.storage.storage_accounts
        keys = accounts.list_keys(GROUP, ACCOUNT).keys_property
        regenerated = accounts.regenerate_key(GROUP, ACCOUNT, {"keyName": "key1"}).keys_property
        after = {k.key_name: k.value for k in regenerated}
        before = {k.key_name: k.value for k in keys}
        expect_true(
            "regenerateKey key1 changes key1",
            after.get("key1") not in (None, before["key1"]),
            after.get("key1"),
        )
        expect("regenerateKey key1 keeps key2", before["key2"], after.get("key2"))
        relisted = {k.key_name: k.value for k in accounts.list_keys(GROUP, ACCOUNT).keys_property}
        expect("listKeys after regenerateKey", after, relisted)

    def storage_patch(self):
        accounts = self.storage.storage_accounts
        updated = accounts.update(GROUP, ACCOUNT, {"properties": {"minimumTlsVersion": "TLS1_2"}})
        expect("storage PATCH minimumTlsVersion answer", "TLS1_2", updated.minimum_tls_version)
        expect(
            "storage GET after the PATCH, minimumTlsVersion",
            "TLS1_2",
            accounts.get_properties(GROUP, ACCOUNT).minimum_tls_version,
        )

    # --- lists, providers, errors ---------------------------------------------------------------

    def lists(self):
        size = self.page_size
        vms = self.compute.virtual_machines
        expect_paged("virtual_machines.list(group)", vms.list(GROUP, **COMPUTE), VMS, size)
        expect_paged("virtual_machines.list_all()", vms.list_all(**COMPUTE), VMS, size)
        usages, pages = paged(self.compute.usage.list(LOCATION, **COMPUTE))
        used = {u.name.value: u.current_value for u in usages}
        expect(
            "usages: standardDSv5Family vCPUs of three running D2s_v5",
            6,
            used.get("standardDSv5Family"),
        )
        expect(f"usages: pages of {size}", math.ceil(len(usages) / size), pages)
        expect_paged(
            "resource_groups.list()",
            self.resources.resource_groups.list(),
            [GROUP, OTHER_GROUP, EMPTY_GROUP],
            size,
            exact=False,
        )
        os_disks = [vms.get(GROUP, vm, **COMPUTE).storage_profile.os_disk.name for vm in VMS]
        expected = (
            ["nsg", "vnet", "pip", "nic-0", "nic-1", "nic-2", DATA_DISK, ACCOUNT] + VMS + os_disks
        )
        items = expect_paged(
            "resources.list_by_resource_group(group)",
            self.resources.resources.list_by_resource_group(GROUP),
            expected,
            size,
        )
        types = {item.name: item.type for item in items}
        expect(
            "generic list type of the VM", "Microsoft.Compute/virtualMachines", types.get(VMS[0])
        )
        expect_paged(
            "resources.list_by_resource_group(group, $filter resourceType)",
            self.resources.resources.list_by_resource_group(
                GROUP, filter="resourceType eq 'Microsoft.Compute/virtualMachines'"
            ),
            VMS,
            size,
        )
        expect_paged(
            "resources.list() (the subscription)",
            self.resources.resources.list(),
            expected + ["pip-other"],
            size,
            exact=False,
        )
        expect_paged(
            "disks.list_by_resource_group(group)",
            self.compute.disks.list_by_resource_group(GROUP, **DISKS),
            [DATA_DISK] + os_disks,
            size,
        )
        expect_paged(
            "network_interfaces.list_all()",
            self.network.network_interfaces.list_all(**NETWORK),
            ["nic-0", "nic-1", "nic-2"],
            size,
        )

    def provider(self):
        provider = self.resources.providers.get("Microsoft.Compute")
        expect("provider namespace", "Microsoft.Compute", provider.namespace)
        expect("provider registrationState", "Registered", provider.registration_state)
        types = {t.resource_type: t for t in provider.resource_types or []}
        expect_true(
            "provider resourceTypes include virtualMachines",
            "virtualMachines" in types,
            sorted(types),
        )
        vm_type = types["virtualMachines"]
        expect_true(
            "virtualMachines api-versions include 2024-11-01",
            "2024-11-01" in (vm_type.api_versions or []),
            vm_type.api_versions,
        )
        expect_true("virtualMachines has locations", bool(vm_type.locations), vm_type.locations)

    def provider_register(self):
        provider = self.resources.providers.register("Microsoft.Compute")
        expect("registered provider namespace", "Microsoft.Compute", provider.namespace)
        # ARM answers Registering while a registration runs, Registered once done (or already).
        expect_true(
            "registrationState after register is Registering or Registered",
            provider.registration_state in ("Registering", "Registered"),
            provider.registration_state,
        )

    def vm_sizes(self):
        """VM sizes in a location: one answer (the spec's list has no nextLink, so the SDK
        follows none and a paged answer would lose sizes)."""
        sizes = {
            size.name: size.number_of_cores
            for size in self.compute.virtual_machine_sizes.list(LOCATION, **COMPUTE)
        }
        for name, cores in [("Standard_D2s_v5", 2), ("Standard_ND96asr_v4", 96)]:
            expect(f"vmSizes in {LOCATION}: numberOfCores of {name}", cores, sizes.get(name))

    def images_and_features(self):
        """What dsinfra's preflight reads before a VM body states Trusted Launch (issue 29): an
        image's newest version and its features, and the subscription's Compute features, with
        a register and an unregister (the emulator answered 501 to all of these)."""
        images = self.compute.virtual_machine_images
        jammy = ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2")
        versions = images.list(LOCATION, *jammy, top=1, orderby="name desc", **COMPUTE)
        expect("versions listed with $top=1", 1, len(versions))
        image = images.get(LOCATION, *jammy, versions[0].name, **COMPUTE)
        expect("jammy gen2 hyperVGeneration", "V2", image.hyper_v_generation)
        features = {f.name: f.value for f in image.features or []}
        expect("jammy gen2 SecurityType", "TrustedLaunchSupported", features.get("SecurityType"))
        gen1 = images.get(LOCATION, "Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts",
                          versions[0].name, **COMPUTE)
        expect("jammy gen1 hyperVGeneration", "V1", gen1.hyper_v_generation)
        expect_true(
            "a Generation 1 image advertises no Trusted Launch",
            all(f.name != "SecurityType" for f in gen1.features or []),
            gen1.features,
        )
        hpc = images.get(LOCATION, "microsoft-dsvm", "ubuntu-hpc", "2204-v100", versions[0].name,
                         **COMPUTE)
        expect("the HPC image is Generation 2 whatever its SKU says", "V2", hpc.hyper_v_generation)
        expect_error(
            "GET a version the marketplace does not have",
            lambda: images.get(LOCATION, *jammy, "0.0.1", **COMPUTE),
            (404,),
        )

        name = "UseStandardSecurityType"
        feature = self.preview.get("Microsoft.Compute", name)
        expect(f"{name} before registering", "NotRegistered", feature.properties.state)
        registered = self.preview.register("Microsoft.Compute", name)
        expect(f"{name} after register", "Registered", registered.properties.state)
        listed = {f.name: f.properties.state for f in self.preview.list("Microsoft.Compute")}
        expect(f"{name} in the provider's list", "Registered",
               listed.get(f"Microsoft.Compute/{name}"))
        expect_true(
            "the list names TrustedLaunchByDefaultPreview",
            "Microsoft.Compute/TrustedLaunchByDefaultPreview" in listed,
            listed,
        )
        # Back as it was: other steps create VMs on this subscription.
        self.preview.unregister("Microsoft.Compute", name)
        expect(f"{name} after unregister", "Unregistered",
               self.preview.get("Microsoft.Compute", name).properties.state)

    def permissions(self):
        """What a Contributor may do, as Azure's authorization client reads it (issue 30): the
        owner assigns Contributor at the subscription to a caller the emulator checks; that
        caller's permissions at the group (Permissions_ListForResourceGroup) are Contributor's
        (`*` but `Microsoft.Authorization/*/Write`), and its role definition write is refused
        with AuthorizationFailed, as dsinfra's idle-park preflight expects."""
        scope = f"/subscriptions/{self.subscription}"
        self.authorization.role_assignments.create(
            scope,
            "0f0e0d0c-0000-4000-8000-000000000031",
            {
                "role_definition_id": f"{scope}/providers/Microsoft.Authorization/roleDefinitions/{CONTRIBUTOR_ROLE}",
                "principal_id": CONTRIBUTOR_PRINCIPAL,
                "principal_type": "User",
            },
        )
        mine = list(self.as_contributor.permissions.list_for_resource_group(GROUP))
        expect("the Contributor's permission entries", 1, len(mine))
        expect("its actions", ["*"], mine[0].actions)
        expect_true(
            "its notActions remove Microsoft.Authorization writes",
            "Microsoft.Authorization/*/Write" in (mine[0].not_actions or []),
            mine[0].not_actions,
        )
        owner = list(self.authorization.permissions.list_for_resource_group(GROUP))
        expect("the owner's actions", [["*"]], [p.actions for p in owner])
        expect_error(
            "a Contributor writing a role definition",
            lambda: self.as_contributor.role_definitions.create_or_update(
                f"{scope}/resourceGroups/{GROUP}",
                "6f1c9a2e-3b7d-4e58-9a0c-5d2e8b4f7a14",
                {
                    "role_name": "sdk contributor role",
                    "role_type": "CustomRole",
                    "permissions": [{"actions": ["Microsoft.Compute/virtualMachines/read"]}],
                    "assignable_scopes": [f"{scope}/resourceGroups/{GROUP}"],
                },
            ),
            (403,),
            "AuthorizationFailed",
        )

    def scope_paths(self):
        """A `{scope}` route written as the JavaScript SDK writes it: the scope's own leading slash
        after the route's (`//subscriptions/...`), which ARM reads as one (issue 29, item 12c: the
        emulator kept the double slash in stored ids, so a later read by the usual path missed
        the resource). This SDK never sends that form, so it is sent as is through the same
        client pipeline: a custom role is written at `//subscriptions/...` and read back at
        `/subscriptions/...`."""
        scope = f"/subscriptions/{self.subscription}"
        role = f"{scope}/providers/Microsoft.Authorization/roleDefinitions/6f1c9a2e-3b7d-4e58-9a0c-5d2e8b4f7a13"
        version = "api-version=2022-04-01"
        body = {
            "properties": {
                "roleName": "sdk scope path",
                "type": "CustomRole",
                "permissions": [{"actions": ["Microsoft.Compute/virtualMachines/read"]}],
                "assignableScopes": [scope],
            }
        }
        put = self.resources.send_request(
            HttpRequest("PUT", f"{self.endpoint}/{role}?{version}", json=body)
        )
        expect(f"PUT /{role} status", 201, put.status_code)
        read = self.resources.send_request(HttpRequest("GET", f"{self.endpoint}{role}?{version}"))
        expect(f"GET {role} (one slash) status", 200, read.status_code)
        expect("the role's id, with one leading slash", role, read.json().get("id"))
        gone = self.resources.send_request(
            HttpRequest("DELETE", f"{self.endpoint}{role}?{version}")
        )
        expect(f"DELETE {role} status", 200, gone.status_code)

    def vm_available_sizes(self):
        """A running VM's own size list (VirtualMachines_ListAvailableSizes): the sizes it can be
        resized to without deallocating, its own among them (issue 29: the emulator answered
        501). VMS[2]: the others are patched or powered meanwhile."""
        vm = self.compute.virtual_machines.get(GROUP, VMS[2], **COMPUTE)
        current = vm.hardware_profile.vm_size
        names = [
            size.name
            for size in self.compute.virtual_machines.list_available_sizes(
                GROUP, VMS[2], **COMPUTE
            )
        ]
        expect_true(f"{VMS[2]} vmSizes includes its own size {current}", current in names, names)
        expect_true(
            f"{VMS[2]} vmSizes while running: only its hardware cluster's sizes",
            "Standard_ND96asr_v4" not in names,
            names,
        )

    def errors(self):
        vms = self.compute.virtual_machines
        expect_error(
            "GET a missing VM",
            lambda: vms.get(GROUP, "missing-vm", **COMPUTE),
            (404,),
            "ResourceNotFound",
        )
        expect_error(
            "GET a VM in a missing group",
            lambda: vms.get("missing-rg", "vm", **COMPUTE),
            (404,),
            "ResourceGroupNotFound",
        )
        expect_error(
            "GET a missing group",
            lambda: self.resources.resource_groups.get("missing-rg"),
            (404,),
            "ResourceGroupNotFound",
        )
        accounts = self.storage.storage_accounts
        bad = "Bad_Name!"
        expect_error(
            "create a storage account with an invalid name",
            lambda: accounts.begin_create(
                GROUP,
                bad,
                {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"},
            ).result(),
            (400,),
            "AccountNameInvalid",
        )
        answer = accounts.check_name_availability(
            {"name": bad, "type": "Microsoft.Storage/storageAccounts"}
        )
        expect(
            "checkNameAvailability of an invalid name",
            (False, "AccountNameInvalid"),
            (answer.name_available, answer.reason),
        )
        taken = accounts.check_name_availability(
            {"name": ACCOUNT, "type": "Microsoft.Storage/storageAccounts"}
        )
        expect(
            "checkNameAvailability of a taken name",
            (False, "AlreadyExists"),
            (taken.name_available, taken.reason),
        )
        expect_error(
            "DELETE a NIC its VM still uses",
            # nic-2: its VM is idle, while the other steps of this stage act on vm-0 and vm-1.
            lambda: self.network.network_interfaces.begin_delete(
                GROUP, "nic-2", **NETWORK
            ).result(),
            (400,),
            "NicInUse",
        )


    # --- Azure Machine Learning ------------------------------------------------------------------

    def ml_dependencies(self):
        """A workspace needs a storage account, a key vault and Application Insights (over a Log
        Analytics workspace): created as a user's script would, all at once, in a group of their
        own (the other steps list GROUP exactly)."""
        self.resources.resource_groups.create_or_update(ML_GROUP, {"location": LOCATION})
        group = f"/subscriptions/{self.subscription}/resourceGroups/{ML_GROUP}/providers"
        bodies = {
            f"{group}/Microsoft.KeyVault/vaults/kv-sdk": {
                "location": LOCATION,
                "properties": {
                    "tenantId": "00000000-0000-0000-0000-0000000000aa",
                    "sku": {"family": "A", "name": "standard"},
                    "enableRbacAuthorization": True,
                },
            },
            f"{group}/Microsoft.OperationalInsights/workspaces/logs-sdk": {
                "location": LOCATION,
                "properties": {"sku": {"name": "PerGB2018"}, "retentionInDays": 30},
            },
        }
        pollers = {
            resource_id: self.resources.resources.begin_create_or_update_by_id(
                resource_id,
                body,
                api_version=DEPENDENCY_API_VERSIONS[
                    resource_id.split("/providers/")[1].rsplit("/", 1)[0]
                ],
            )
            for resource_id, body in bodies.items()
        }
        account = self.storage.storage_accounts.begin_create(
            ML_GROUP,
            ML_ACCOUNT,
            {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"},
        )
        for resource_id, poller in pollers.items():
            done = poller.result()
            expect(f"{resource_id} id", resource_id.lower(), done.id.lower())
        logs = f"{group}/Microsoft.OperationalInsights/workspaces/logs-sdk"
        insights = f"{group}/Microsoft.Insights/components/appi-sdk"
        component = self.resources.resources.begin_create_or_update_by_id(
            insights,
            api_version=DEPENDENCY_API_VERSIONS["Microsoft.Insights/components"],
            parameters={
                "location": LOCATION,
                "kind": "web",
                "properties": {"Application_Type": "web", "WorkspaceResourceId": logs},
            },
        ).result()
        expect("Application Insights id", insights.lower(), component.id.lower())
        self.ids["ml_storage"] = account.result().id
        self.ids["key_vault"] = f"{group}/Microsoft.KeyVault/vaults/kv-sdk"
        self.ids["insights"] = insights

    def ml_workspace(self):
        workspaces = self.ml.workspaces
        expect_error(
            "create a workspace whose key vault does not exist",
            lambda: workspaces.begin_create_or_update(
                ML_GROUP,
                "ws-broken",
                ml_models.Workspace(
                    location=LOCATION,
                    identity=ml_models.Identity(type="SystemAssigned"),
                    storage_account=self.ids["ml_storage"],
                    key_vault=self.ids["key_vault"] + "-missing",
                    application_insights=self.ids["insights"],
                ),
                **ML,
            ).result(),
            (400, 404),
        )
        created = workspaces.begin_create_or_update(
            ML_GROUP,
            ML_WORKSPACE,
            ml_models.Workspace(
                location=LOCATION,
                identity=ml_models.Identity(type="SystemAssigned"),
                sku=ml_models.Sku(name="Basic", tier="Basic"),
                friendly_name="sdk lifecycle",
                storage_account=self.ids["ml_storage"],
                key_vault=self.ids["key_vault"],
                application_insights=self.ids["insights"],
            ),
            **ML,
        ).result()
        expect("workspace provisioningState", "Succeeded", created.provisioning_state)
        expect("workspace storage account", self.ids["ml_storage"].lower(), created.storage_account.lower())
        got = workspaces.get(ML_GROUP, ML_WORKSPACE, **ML)
        expect("workspace GET location", LOCATION, got.location)

    def ml_compute(self):
        computes = self.ml.machine_learning_compute
        expect_error(
            "create a compute in a workspace that does not exist",
            lambda: computes.begin_create_or_update(
                ML_GROUP, "ws-none", ML_COMPUTE, self.aml_compute(ML_NODES), **ML
            ).result(),
            (404,),
        )
        created = computes.begin_create_or_update(
            ML_GROUP, ML_WORKSPACE, ML_COMPUTE, self.aml_compute(ML_NODES), **ML
        ).result()
        expect("compute provisioningState", "Succeeded", created.properties.provisioning_state)
        expect("compute type", "AmlCompute", created.properties.compute_type)
        nodes = self.wait_for_nodes(ML_NODES)
        expect_true(
            f"{ML_NODES} nodes listed, each with an address and a port",
            len(nodes) == ML_NODES and all(n.public_ip_address and n.port for n in nodes),
            [(n.node_id, n.public_ip_address, n.port, n.node_state) for n in nodes],
        )
        first_ids = {n.node_id for n in nodes}
        listed = [c.name for c in paged(computes.list_by_workspace(ML_GROUP, ML_WORKSPACE, **ML))[0]]
        expect("computes of the workspace", [ML_COMPUTE], listed)
        # Scale to zero (what `dsinfra park` does) and back: the nodes come back as new nodes.
        for count in (0, ML_NODES):
            body = {
                "properties": {
                    "properties": {
                        "scaleSettings": {
                            "minNodeCount": count,
                            "maxNodeCount": count,
                            "nodeIdleTimeBeforeScaleDown": "PT120S",
                        }
                    }
                }
            }
            computes.begin_update(
                ML_GROUP, ML_WORKSPACE, ML_COMPUTE, json.dumps(body).encode(), content_type="application/json", **ML
            ).result()
            nodes = self.wait_for_nodes(count)
            expect(f"nodes after scaling to {count}", count, len(nodes))
        expect_true(
            "nodes after scaling down and up again are new nodes",
            not first_ids & {n.node_id for n in nodes},
            [n.node_id for n in nodes],
        )

    def aml_compute(self, count):
        return ml_models.ComputeResource(
            location=LOCATION,
            properties=ml_models.AmlCompute(
                properties=ml_models.AmlComputeProperties(
                    vm_size="Standard_D2s_v5",
                    vm_priority="Dedicated",
                    scale_settings=ml_models.ScaleSettings(
                        max_node_count=count,
                        min_node_count=count,
                        node_idle_time_before_scale_down=datetime.timedelta(seconds=120),
                    ),
                    user_account_credentials=ml_models.UserAccountCredentials(
                        admin_user_name="azureuser",
                        admin_user_ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0sdk sdk",
                    ),
                    remote_login_port_public_access="Enabled",
                )
            ),
        )

    def wait_for_nodes(self, count):
        """GET the compute until it is steady with `count` usable nodes, then list them."""
        computes = self.ml.machine_learning_compute
        deadline = time.monotonic() + 30
        while True:
            compute = computes.get(ML_GROUP, ML_WORKSPACE, ML_COMPUTE, **ML).properties.properties
            states = compute.node_state_counts
            usable = (states.idle_node_count or 0) + (states.running_node_count or 0) if states else 0
            if compute.allocation_state == "Steady" and usable == count == compute.current_node_count:
                return paged(computes.list_nodes(ML_GROUP, ML_WORKSPACE, ML_COMPUTE, **ML))[0]
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"the compute never reached {count} usable nodes: "
                    f"{compute.allocation_state}, {compute.current_node_count}, {states}"
                )
            time.sleep(0.1)

    def ml_deletes(self):
        computes = self.ml.machine_learning_compute
        computes.begin_delete(ML_GROUP, ML_WORKSPACE, ML_COMPUTE, underlying_resource_action="Delete", **ML).result()
        expect_error(
            "GET the compute after its delete",
            lambda: computes.get(ML_GROUP, ML_WORKSPACE, ML_COMPUTE, **ML),
            (404,),
        )
        self.ml.workspaces.begin_delete(ML_GROUP, ML_WORKSPACE, **ML).result()
        expect_error(
            "GET the workspace after its delete",
            lambda: self.ml.workspaces.get(ML_GROUP, ML_WORKSPACE, **ML),
            (404,),
        )
        self.resources.resource_groups.begin_delete(ML_GROUP).result()
        expect(
            "check_existence of the workspace's group after its delete",
            False,
            self.resources.resource_groups.check_existence(ML_GROUP),
        )

    # --- deletes ---------------------------------------------------------------------------------

    def deletes(self):
        vms = self.compute.virtual_machines
        for poller in [vms.begin_delete(GROUP, vm, **COMPUTE) for vm in VMS]:
            poller.result()
        for vm in VMS:
            expect_error(
                f"GET {vm} after its delete",
                lambda vm=vm: vms.get(GROUP, vm, **COMPUTE),
                (404,),
                "ResourceNotFound",
            )
        disk = self.compute.disks.get(GROUP, DATA_DISK, **DISKS)
        expect(
            "data disk state once its VM is deleted (deleteOption Detach)",
            "Unattached",
            disk.disk_state,
        )
        self.compute.disks.begin_delete(GROUP, DATA_DISK, **DISKS).result()
        expect_error(
            "GET the data disk after its delete",
            lambda: self.compute.disks.get(GROUP, DATA_DISK, **DISKS),
            (404,),
            "ResourceNotFound",
        )
        nics = self.network.network_interfaces
        for poller in [nics.begin_delete(GROUP, f"nic-{i}", **NETWORK) for i in range(len(VMS))]:
            poller.result()
        self.storage.storage_accounts.delete(GROUP, ACCOUNT)
        expect_error(
            "GET the storage account after its delete",
            lambda: self.storage.storage_accounts.get_properties(GROUP, ACCOUNT),
            (404,),
            "ResourceNotFound",
        )
        groups = self.resources.resource_groups
        all_groups = (GROUP, OTHER_GROUP, EMPTY_GROUP)
        for poller in [groups.begin_delete(group) for group in all_groups]:
            poller.result()
        for group in all_groups:
            expect(
                f"check_existence of {group} after its delete", False, groups.check_existence(group)
            )
        expect_error(
            "GET a deleted group", lambda: groups.get(GROUP), (404,), "ResourceGroupNotFound"
        )
        left = [r.id for r in self.resources.resources.list()]
        expect("resources left in the subscription", [], left)

    def stages(self):
        """The steps in stages: a stage's steps run at once, each after the steps it needs.

        Every long-running operation costs at least one second with this SDK (azure-core reads
        `Retry-After` before `retry-after-ms`, and HTTP's Retry-After counts whole seconds), so
        the lifecycle runs what a user could run in parallel in parallel, to stay fast.
        """
        return [
            [("group", self.group, [])],
            [
                ("network", self.network_resources, ["group"]),
                ("disk_create", self.disk_create, ["group"]),
                ("storage_account_keys", self.storage_account, ["group"]),
                ("provider_get", self.provider, []),
                ("vm_sizes", self.vm_sizes, []),
                ("images_and_features", self.images_and_features, []),
                ("scope_paths", self.scope_paths, []),
                ("permissions", self.permissions, ["group"]),
                ("ml_dependencies", self.ml_dependencies, ["group"]),
                ("aks_cluster", self.aks.cluster, []),
            ],
            [
                ("vm_create", self.vm_create, ["network"]),
                ("disk_resize", self.disk_resize, ["disk_create"]),
                ("storage_regenerate_key", self.storage_regenerate_key, ["storage_account_keys"]),
                ("storage_patch", self.storage_patch, ["storage_account_keys"]),
                ("provider_register", self.provider_register, []),
                ("ml_workspace", self.ml_workspace, ["ml_dependencies"]),
                ("aks_pools", self.aks.pools, ["aks_cluster"]),
            ],
            [
                ("vm_patch_attach_disk", self.vm_attach_disk, ["vm_create", "disk_create"]),
                ("power_actions", self.power, ["vm_create"]),
                ("spot_eviction", self.spot, ["network"]),
                ("vm_available_sizes", self.vm_available_sizes, ["vm_create"]),
                ("error_codes", self.errors, ["vm_create", "storage_account_keys"]),
                ("ml_compute", self.ml_compute, ["ml_workspace"]),
                ("aks_stop_start", self.aks.stop_start, ["aks_pools"]),
            ],
            [
                ("lists_paged", self.lists, ["vm_create", "disk_create", "storage_account_keys"]),
                ("ml_deletes", self.ml_deletes, ["ml_compute"]),
                ("aks_deletes", self.aks.deletes, ["aks_cluster"]),
            ],
            [("deletes", self.deletes, ["vm_create", "disk_create", "storage_account_keys"])],
        ]


def run_step(name, step):
    """Runs one step: PASS, or FAIL with what was expected and what was answered."""
    began = time.monotonic()
    try:
        step()
        return "PASS", f"PASS  {name} ({time.monotonic() - began:.2f} s)"
    except StepFailed as failure:
        return "FAIL", f"FAIL  {name}: {failure}"
    except HttpResponseError as error:
        request = error.response.request if error.response is not None else None
        where = f" to {request.method} {request.url}" if request is not None else ""
        return "FAIL", f"FAIL  {name}: expected success, answered {describe(error)}{where}"
    except Exception:  # noqa: BLE001 - any other failure is reported with its traceback
        return "FAIL", f"FAIL  {name}: unexpected exception\n{traceback.format_exc()}"


def run(lifecycle):
    outcome = {}
    started = time.monotonic()
    for stage in lifecycle.stages():
        runnable = []
        for name, step, needs in stage:
            blocked = [n for n in needs if outcome.get(n) != "PASS"]
            if blocked:
                outcome[name] = "SKIP"
                print(f"SKIP  {name} (needs {', '.join(blocked)})", flush=True)
            else:
                runnable.append((name, step))
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
            futures = {pool.submit(run_step, name, step): name for name, step in runnable}
            for future in concurrent.futures.as_completed(futures):
                result, line = future.result()
                outcome[futures[future]] = result
                print(line, flush=True)
    failed = [n for n, o in outcome.items() if o != "PASS"]
    total = time.monotonic() - started
    print(
        f"{len(outcome) - len(failed)} of {len(outcome)} steps passed in {total:.1f} s", flush=True
    )
    if failed:
        print(f"not passed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--subscription", required=True)
    parser.add_argument("--page-size", type=int, required=True, help="the emulator's page size")
    args = parser.parse_args()
    return run(Lifecycle(args.endpoint, args.subscription, args.page_size))


if __name__ == "__main__":
    sys.exit(main())
