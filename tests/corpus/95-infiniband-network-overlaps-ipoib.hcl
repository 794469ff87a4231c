# Issue 29 item 8: Azure gives the InfiniBand interfaces 172.16.0.0/16; a VNet overlapping it
# makes routes on the nodes ambiguous. A warning: the CPU VM alone would not care.
experiment = "ipoib"
azure { location = "eastus" }
network "main" {
  address_space = ["172.16.0.0/12"]
  subnet "nodes" { cidr = "172.16.1.0/24" }
  ssh_from = ["203.0.113.0/24"]
}
cluster "train" {
  size    = "Standard_HB120rs_v3"
  count   = 2
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "prep" {
  size    = "Standard_D4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
