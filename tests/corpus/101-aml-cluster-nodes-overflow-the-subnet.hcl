# AmlCompute nodes take one address each in the subnet they join, after the VMs' NICs.
experiment = "aml"
azure { location = "southcentralus" }
network "main" {
  ssh_from = ["198.51.100.0/24"]
  subnet "default" { cidr = "10.0.0.0/25" }
}
vm "prep" {
  size    = "Standard_D4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
aml_workspace "ws" {}
aml_cluster "scratch" {
  size    = "Standard_D4s_v5"
  count   = 123
  network = network.main
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
