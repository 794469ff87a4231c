azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
cluster "train" {
  size    = "Standard_ND40rs_v2"
  sizes   = ["Standard_ND40rs_v2", "Standard_ND96asr_v4"]
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "gpu" {
  sizes   = ["Standard_NC4as_T4_v3", "Standard_NC6s_v9"]
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "cpu" {
  sizes   = []
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
