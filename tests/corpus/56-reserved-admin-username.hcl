azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  admin_username = "admin"
}
