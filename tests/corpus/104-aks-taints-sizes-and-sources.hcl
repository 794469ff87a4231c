azure { location = "eastus" }
aks "train" {
  api_server_from = ["Internet"]
  system_size     = "Standard_B1s"
  pool "gpu" {
    size       = "Standard_NC24ads_A100_v9"
    count      = 1001
    taints     = ["gpu=true"]
    gpu_driver = "skip"
  }
}
