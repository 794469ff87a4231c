azure {
  location = "eastus"
  tags     = { managed-by = "me" }
}
network "main" {
  ssh_from = ["*"]
}
vm "gpu" {
  size      = "Standard_NC6s_v4"
  imgae     = "ubuntu-22.04"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  os_disk_gb = 10
  zone      = "4"
}
storage_account "data" {
  sku = "Standard_LSR"
}
disk "d" { attach_to = vm.gpu }
