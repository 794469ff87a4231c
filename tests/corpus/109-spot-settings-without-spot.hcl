azure { location = "eastus" }
network "main" { ssh_from = ["203.0.113.7/32"] }
vm "gpu" {
  size      = "Standard_NC4as_T4_v3"
  image     = "dsvm-ubuntu-22.04"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"
  eviction  = "delete"
  max_price = 0.5
}
vm "cheap" {
  size      = "Standard_NC4as_T4_v3"
  image     = "dsvm-ubuntu-22.04"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"
  priority  = "spot"
  max_price = 0
}
vm "typo" {
  size      = "Standard_NC4as_T4_v3"
  image     = "dsvm-ubuntu-22.04"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"
  priority  = "spott"
}
