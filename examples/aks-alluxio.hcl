# Kubernetes on Azure (seed 003): an AKS cluster whose training pods read Azure Blob through
# Alluxio, with GPU nodes that park at zero.
#
# The data path: the Blob container is a PersistentVolume of AKS's Blob CSI driver (blobfuse2,
# the same cache and timeouts as the `blobfuse2` step on a VM); Alluxio, installed by its
# operator (CRDs `AlluxioCluster` and `Dataset`), caches it on the `cache` pool's nodes and
# serves it to the training Job through its FUSE mount. dsinfra applies every object by
# server-side apply once the cluster answers, records them, and prunes one you remove here.
#
#   dsinfra plan aks-alluxio.hcl          # cluster, pools and objects, with costs
#   dsinfra apply aks-alluxio.hcl --emulator
#   dsinfra kubectl aks-alluxio.hcl -- get jobs -n ml
#   dsinfra park aks-alluxio.hcl          # the GPU and cache pools scale to zero
experiment = "aks-alluxio"

variable "my_ip" {
  description = "Where you connect from, as a CIDR (your public IP/32)"
  default     = "203.0.113.7/32"
}

azure { location = "eastus" }

storage_account "lake" {
  container "images" {} # the training data
}

aks "train" {
  kubernetes_version = "1.33"
  api_server_from    = [var.my_ip]
  blob_csi           = true # required by blob_volume

  pool "gpu" {
    size   = "Standard_NC24ads_A100_v4" # 1x A100 80 GB per node
    count  = 2
    taints = ["sku=gpu:NoSchedule"] # only the training pods land here
  }
  pool "cache" {
    size  = "Standard_E16s_v5" # Alluxio workers: 128 GB of memory for the cache
    count = 2
  }

  # The container as a claim `images` in namespace `ml` (a Secret with the account key, read
  # at apply, a PersistentVolume of blob.csi.azure.com and the claim bound to it).
  blob_volume "images" {
    container = storage_account.lake.container.images
    namespace = "ml"
    read_only = true
  }

  # The Alluxio operator's CRDs (on a real cluster, the operator's Helm chart brings them and
  # its controller; this file stands in with the fields the objects below use).
  manifest "alluxio-crds" {
    file = "aks-alluxio/alluxio-crds.yaml"
  }
  manifest "alluxio" {
    file = "aks-alluxio/alluxio.yaml"
  }
  manifest "train" {
    file = "aks-alluxio/train.yaml"
  }
}
