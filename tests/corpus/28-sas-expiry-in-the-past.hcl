azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
sas "read" {
  container = storage_account.data.container.raw
  expiry    = "2020-01-01T00:00:00Z"
}
