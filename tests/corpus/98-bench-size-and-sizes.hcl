# `block_sizes` is the list form of `block_size`: one of them, not both.
azure { location = "eastus" }
network "main" {}
vm "box" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "elbencho" {
    threads     = [1, 0]
    block_size  = "4M"
    block_sizes = ["256K", "4M"]
  }
}
