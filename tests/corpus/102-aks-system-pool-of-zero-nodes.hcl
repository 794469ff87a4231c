azure { location = "eastus" }
aks "train" {
  api_server_from = ["198.51.100.0/24"]
  system_count    = 0
  pool "gpu" { size = "Standard_NC24ads_A100_v4" }
}
