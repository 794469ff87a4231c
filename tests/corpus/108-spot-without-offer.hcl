azure { location = "eastus" }
network "main" { ssh_from = ["203.0.113.7/32"] }
# The B-series has no spot offer anywhere.
vm "prep" {
  size     = "Standard_B2s"
  image    = "ubuntu-22.04"
  ssh_key  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"
  priority = "spot"
}
# A cap below the catalog's spot price: the VM may never start.
cluster "train" {
  size      = "Standard_ND40rs_v2"
  count     = 2
  image     = "hpc-ubuntu-22.04"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"
  priority  = "spot"
  max_price = 1.25
  eviction  = "delete"
}
