azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
sas "none" {
  permissions = "r"
}
sas "both" {
  container = storage_account.data.container.raw
  account   = storage_account.data
}
