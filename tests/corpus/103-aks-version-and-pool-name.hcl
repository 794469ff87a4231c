azure { location = "eastus" }
aks "train" {
  kubernetes_version = "latest"
  api_server_from    = ["198.51.100.0/24"]
  pool "GPU-pool" { size = "Standard_NC24ads_A100_v4" }
}
