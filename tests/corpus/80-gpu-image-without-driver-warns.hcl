# A GPU size needs an image with the NVIDIA driver: plain Ubuntu (alias, default or URN) warns,
# the Data Science VM and HPC images and CPU sizes do not.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }

vm "plain" {
  size    = "Standard_NC4as_T4_v3"
  image   = "ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

vm "urn" {
  size    = "Standard_NC24ads_A100_v4"
  image   = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

vm "dsvm" {
  size    = "Standard_NC4as_T4_v3"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

cluster "hpc" {
  size    = "Standard_ND40rs_v2"
  count   = 2
  image   = "hpc-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

vm "cpu" {
  size    = "Standard_D4s_v3"
  image   = "ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
