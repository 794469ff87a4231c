azure { location = "eastus" }
aks "train" {
  api_server_from = ["203.0.113.7/32"]
  manifest "missing" { file = "aks-objects/no-such-file.yaml" }
  manifest "yaml" { file = "aks-objects/bad-yaml.yaml" }
  manifest "kind" { file = "aks-objects/no-kind.yaml" }
  manifest "once" { file = "aks-objects/twice.yaml" }
  manifest "again" { file = "aks-objects/twice.yaml" }
}
