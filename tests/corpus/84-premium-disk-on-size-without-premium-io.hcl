# Dv2 sizes have no premium storage (DSv2 have): Azure refuses a Premium SSD on them.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "prep" {
  size        = "Standard_D3_v2"
  os_disk_sku = "Premium_LRS"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
disk "data" {
  size_gb   = 256
  sku       = "Premium_LRS"
  attach_to = vm.prep
}
