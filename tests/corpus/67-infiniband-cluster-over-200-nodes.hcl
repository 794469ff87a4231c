azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
cluster "train" {
  size    = "Standard_ND40rs_v2"
  count   = 201
  image   = "hpc-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
