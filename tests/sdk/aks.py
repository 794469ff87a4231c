"""The AKS steps of the lifecycle (tests/sdk/lifecycle.py): azure-mgmt-containerservice 40.2.0,
whose default api-version is the 2025-10-01 spec the emulator is held to, drives a managed
cluster and its agent pools through create, a GPU pool, scaling to zero, the stopped-cluster
rule, credentials and deletes, as a user's script would.
"""

import base64

from azure.mgmt.containerservice import ContainerServiceClient

AKS_GROUP = "rg-sdk-aks"
AKS_CLUSTER = "aks-sdk"
LOCATION = "eastus"
SYSTEM_POOL = {
    "name": "system",
    "mode": "System",
    "count": 1,
    # Not a DSv5 size: the lifecycle counts the DSv5 family's usage of its own VMs, and pool
    # nodes hold the same Compute quota.
    "vmSize": "Standard_D3_v2",
    "osType": "Linux",
    "type": "VirtualMachineScaleSets",
}
GPU_POOL = "gpu"


def gpu_pool(count):
    return {
        "properties": {
            "mode": "User",
            "count": count,
            "vmSize": "Standard_NC6s_v3",
            "osType": "Linux",
            "nodeTaints": ["sku=gpu:NoSchedule"],
            "gpuProfile": {"driver": "None"},
        }
    }


class AksSteps:
    """Mixed into the lifecycle: needs `expect`, `expect_error`, `same_id` and the resources
    client, passed in so that this module imports nothing of the lifecycle's."""

    def __init__(self, credential, subscription, options, resources, checks):
        self.aks = ContainerServiceClient(credential, subscription, **options)
        self.resources = resources
        self.expect, self.expect_true, self.expect_error, self.same_id = checks

    def versions(self):
        listed = self.aks.managed_clusters.list_kubernetes_versions(LOCATION)
        minors = [v.version for v in listed.values]
        self.expect_true("kubernetesVersions lists minors", len(minors) >= 2, minors)
        defaults = [v.version for v in listed.values if v.is_default]
        self.expect("one default minor", 1, len(defaults))
        return listed

    def cluster(self):
        self.resources.resource_groups.create_or_update(AKS_GROUP, {"location": LOCATION})
        listed = self.versions()
        minor = listed.values[-1].version
        self.expect_error(
            "a Kubernetes version the region does not offer",
            lambda: self.aks.managed_clusters.begin_create_or_update(
                AKS_GROUP,
                AKS_CLUSTER,
                {
                    "location": LOCATION,
                    "properties": {
                        "kubernetesVersion": "1.19",
                        "dnsPrefix": "sdk",
                        "agentPoolProfiles": [SYSTEM_POOL],
                    },
                },
            ).result(),
            (400,),
            "K8sVersionNotSupported",
        )
        self.expect_error(
            "a cluster without a System pool",
            lambda: self.aks.managed_clusters.begin_create_or_update(
                AKS_GROUP,
                AKS_CLUSTER,
                {
                    "location": LOCATION,
                    "properties": {
                        "dnsPrefix": "sdk",
                        "agentPoolProfiles": [dict(SYSTEM_POOL, mode="User")],
                    },
                },
            ).result(),
            (400,),
            "InvalidParameter",
        )
        created = self.aks.managed_clusters.begin_create_or_update(
            AKS_GROUP,
            AKS_CLUSTER,
            {
                "location": LOCATION,
                "identity": {"type": "SystemAssigned"},
                "properties": {
                    "kubernetesVersion": minor,
                    "dnsPrefix": "sdk",
                    "agentPoolProfiles": [SYSTEM_POOL],
                    "apiServerAccessProfile": {"authorizedIPRanges": ["203.0.113.7/32"]},
                    "storageProfile": {"blobCSIDriver": {"enabled": True}},
                },
            },
        ).result()
        self.expect("cluster provisioningState", "Succeeded", created.provisioning_state)
        self.expect("cluster powerState", "Running", created.power_state.code)
        self.expect_true(
            "current version is a patch of the minor asked",
            created.current_kubernetes_version.startswith(minor + "."),
            created.current_kubernetes_version,
        )
        self.expect("Blob CSI driver kept", True, created.storage_profile.blob_csi_driver.enabled)
        pools = [p.name for p in created.agent_pool_profiles]
        self.expect("the cluster's pools", ["system"], pools)
        node_group = created.node_resource_group
        self.expect(
            "the node resource group exists",
            True,
            self.resources.resource_groups.check_existence(node_group),
        )
        managed_by = self.resources.resource_groups.get(node_group).managed_by
        self.expect_true("the node group is managed by the cluster", self.same_id(managed_by, created.id), managed_by)
        self.node_group = node_group

    def pools(self):
        pools = self.aks.agent_pools
        self.expect_error(
            "a GPU pool over the family's quota",
            lambda: pools.begin_create_or_update(
                AKS_GROUP,
                AKS_CLUSTER,
                GPU_POOL,
                {"properties": dict(gpu_pool(1)["properties"], vmSize="Standard_NC24ads_A100_v4", count=200)},
            ).result(),
            (400,),
            "QuotaExceeded",
        )
        gpu = pools.begin_create_or_update(AKS_GROUP, AKS_CLUSTER, GPU_POOL, gpu_pool(2)).result()
        self.expect("GPU pool count", 2, gpu.count)
        self.expect("GPU pool driver choice", "None", gpu.gpu_profile.driver)
        self.expect("GPU pool taints", ["sku=gpu:NoSchedule"], gpu.node_taints)
        scaled = pools.begin_create_or_update(AKS_GROUP, AKS_CLUSTER, GPU_POOL, gpu_pool(0)).result()
        self.expect("a User pool scales to 0", 0, scaled.count)
        self.expect_error(
            "a System pool of 0 nodes",
            lambda: pools.begin_create_or_update(
                AKS_GROUP, AKS_CLUSTER, "system", {"properties": dict(SYSTEM_POOL, count=0)}
            ).result(),
            (400,),
            "InvalidParameter",
        )
        resized = gpu_pool(0)
        resized["properties"]["vmSize"] = "Standard_NC24ads_A100_v4"
        self.expect_error(
            "a pool's size changed in place",
            lambda: pools.begin_create_or_update(AKS_GROUP, AKS_CLUSTER, GPU_POOL, resized).result(),
            (400,),
            "PropertyChangeNotAllowed",
        )
        self.expect_error(
            "deleting the last System pool",
            lambda: pools.begin_delete(AKS_GROUP, AKS_CLUSTER, "system").result(),
            (400,),
            "OperationNotAllowed",
        )
        names = sorted(p.name for p in pools.list(AKS_GROUP, AKS_CLUSTER))
        self.expect("agentPools list", ["gpu", "system"], names)

    def stop_start(self):
        clusters = self.aks.managed_clusters
        clusters.begin_stop(AKS_GROUP, AKS_CLUSTER).result()
        stopped = clusters.get(AKS_GROUP, AKS_CLUSTER)
        self.expect("powerState after stop", "Stopped", stopped.power_state.code)
        pool = self.aks.agent_pools.get(AKS_GROUP, AKS_CLUSTER, GPU_POOL)
        self.expect("a stopped cluster's pool is stopped", "Stopped", pool.power_state.code)
        self.expect_error(
            "a pool change while the cluster is stopped",
            lambda: self.aks.agent_pools.begin_create_or_update(
                AKS_GROUP, AKS_CLUSTER, GPU_POOL, gpu_pool(1)
            ).result(),
            (409,),
            "OperationNotAllowed",
        )
        credentials = clusters.list_cluster_user_credentials(AKS_GROUP, AKS_CLUSTER)
        kubeconfig = credentials.kubeconfigs[0].value
        if isinstance(kubeconfig, str):
            kubeconfig = base64.b64decode(kubeconfig)
        text = kubeconfig.decode()
        self.expect_true("the kubeconfig names a server", "server: http" in text, text)
        self.expect_true("the kubeconfig holds a token", "token: " in text, text)
        clusters.begin_start(AKS_GROUP, AKS_CLUSTER).result()
        self.expect("powerState after start", "Running", clusters.get(AKS_GROUP, AKS_CLUSTER).power_state.code)

    def deletes(self):
        self.aks.agent_pools.begin_delete(AKS_GROUP, AKS_CLUSTER, GPU_POOL).result()
        self.aks.managed_clusters.begin_delete(AKS_GROUP, AKS_CLUSTER).result()
        self.expect(
            "the node resource group is gone with its cluster",
            False,
            self.resources.resource_groups.check_existence(self.node_group),
        )
        self.resources.resource_groups.begin_delete(AKS_GROUP).result()
