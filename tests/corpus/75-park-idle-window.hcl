# Idle windows: under 2 minutes, over 7 days, and not a duration. A valid one with `at`.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "short" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    idle = "90s"
  }
}
vm "long" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    at   = "19:00"
    idle = "8d"
  }
}
vm "words" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    idle = "45 minutes"
  }
}
vm "fine" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  park {
    at   = "19:00"
    idle = "1h30m"
  }
}
