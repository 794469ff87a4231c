# NC6s_v3 retired on 2025-09-30; Dv2 retires on 2028-05-01. Both still validate, with the date.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "old" {
  size    = "Standard_NC6s_v3"
  image   = "hpc-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "prep" {
  size    = "Standard_D3_v2"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
