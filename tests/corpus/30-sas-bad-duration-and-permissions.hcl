azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
sas "read" {
  container   = storage_account.data.container.raw
  permissions = "rlz"
  expires_in  = "3 weeks"
}
sas "long" {
  account    = storage_account.data
  expires_in = "400d"
}
