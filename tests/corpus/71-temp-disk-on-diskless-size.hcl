azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
vm "prep" {
  size    = "Standard_D4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "blobfuse2" { container = storage_account.data.container.raw }
}
vm "copy" {
  size    = "Standard_E4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "stage" {
    from = storage_account.data.container.raw
    to   = "{temp}/data"
  }
  # An explicit path off the temp disk works on any size.
  step "blobfuse2" {
    container = storage_account.data.container.raw
    cache_dir = "/data/blobfuse2"
  }
}
cluster "readers" {
  sizes   = ["Standard_D16ds_v5", "Standard_D16s_v5"]
  count   = 2
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "beeond" {}
}
