# Issue 29 item 7: an InfiniBand cluster's nodes share an availability set, and ARM refuses a VM
# in both an availability set and a zone (after the network and the set exist).
experiment = "zoned"
azure { location = "eastus" }
network "main" { ssh_from = ["203.0.113.0/24"] }
cluster "train" {
  size    = "Standard_ND40rs_v2"
  count   = 2
  image   = "hpc-ubuntu-22.04"
  zone    = "1"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
