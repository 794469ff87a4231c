azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
cluster "c" {
  size    = "Standard_D4s_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
disk "a" {
  size_gb   = 128
  attach_to = vm.gpu
}
disk "b" {
  size_gb   = 128
  attach_to = vm.gpu
}
disk "c" {
  size_gb   = 2
  attach_to = cluster.c
}
