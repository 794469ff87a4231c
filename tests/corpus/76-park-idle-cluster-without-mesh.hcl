# A cluster's head samples its other nodes over the SSH mesh: idle parking needs the step.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
cluster "train" {
  size    = "Standard_D4ds_v5"
  count   = 3
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    idle = "45m"
  }
}
cluster "solo" {
  size    = "Standard_D4ds_v5"
  count   = 1
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    idle = "45m"
  }
}
