azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
sas "read" { container = storage_account.data.container.raw }
vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "script" {
    script      = "true"
    sas         = sas.reed
    storage_key = storage_account.dat
  }
}
