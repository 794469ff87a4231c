# `storage_bench` compares directories: absolute, each once, and a size it can write.
azure { location = "eastus" }
network "main" {}
vm "box" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "storage_bench" {
    paths     = ["/mnt/resource", "mnt/blob"]
    file_size = "lots"
  }
  step "storage_bench" {
    name = "again"
  }
}
