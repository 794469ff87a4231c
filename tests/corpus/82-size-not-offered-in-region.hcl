# Azure offers ND H200 in eastus2, not in eastus: the plan says where it is offered.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
cluster "train" {
  size    = "Standard_ND96isr_H200_v5"
  count   = 2
  image   = "hpc-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
