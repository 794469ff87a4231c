# A sweep axis written as an empty list measures nothing.
azure { location = "eastus" }
network "main" {}
cluster "scratch" {
  size    = "Standard_D4ds_v5"
  count   = 2
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "elbencho" {
    threads     = []
    block_sizes = ["256K", "4MB"]
  }
}
