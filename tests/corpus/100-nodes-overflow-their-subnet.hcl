azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "prep" {
  size    = "Standard_D4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
cluster "train" {
  size    = "Standard_D4s_v5"
  count   = 251
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
