azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
disk "raw" {
  size_gb   = 64
  attach_to = vm.prep
  fs        = "xfs"
}
disk "relative" {
  size_gb   = 64
  attach_to = vm.prep
  lun       = 1
  mount     = "data"
}
disk "hidden" {
  size_gb   = 64
  attach_to = vm.prep
  lun       = 2
  mount     = "/mnt"
}
disk "odd" {
  size_gb   = 64
  attach_to = vm.prep
  lun       = 3
  mount     = "/data/odd"
  fs        = "btrfs"
}
vm "prep" {
  size    = "Standard_D4ds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
