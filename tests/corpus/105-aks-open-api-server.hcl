azure { location = "eastus" }
aks "train" {
  pool "gpu" { size = "Standard_NC24ads_A100_v4" }
}
