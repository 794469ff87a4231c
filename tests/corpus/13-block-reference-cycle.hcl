azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "a" {
  size           = "Standard_D4s_v5"
  admin_username = vm.b.admin_username
  ssh_key        = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "b" {
  size           = "Standard_D4s_v5"
  admin_username = vm.a.admin_username
  ssh_key        = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
