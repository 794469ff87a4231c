# A park block needs a time, an idle window, or both.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "box" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    time_zone = "UTC"
  }
}
