# Kubernetes on Azure (seed 003, first part): an AKS cluster with a GPU node pool that parks at
# zero nodes, the Blob CSI driver on, and its API server reachable only from your address.
# `dsinfra park` scales the GPU pool to zero (the System pool keeps its one node);
# `dsinfra unpark` brings the GPU nodes back.
experiment = "aks-gpu"

variable "my_ip" {
  description = "Where you connect from, as a CIDR (your public IP/32)"
  default     = "203.0.113.7/32"
}

azure { location = "eastus" }

aks "train" {
  kubernetes_version = "1.33"
  api_server_from    = [var.my_ip]
  blob_csi           = true # the Blob CSI driver: Blob containers as PersistentVolumes

  pool "gpu" {
    size       = "Standard_NC24ads_A100_v4" # 1x A100 80 GB per node
    count      = 2
    taints     = ["sku=gpu:NoSchedule"] # only pods that tolerate it land on GPU nodes
    gpu_driver = "install"              # AKS installs the NVIDIA driver ("none": the GPU operator's)
  }
}
