# Issue 29 item 10: Arm64 sizes boot Arm64 images only. The Ubuntu aliases pick the Arm64 SKU (no
# diagnostic for vm "arm"); the DSVM image has none, and an explicit x64 URN is refused too.
experiment = "arm"
azure { location = "eastus" }
network "main" { ssh_from = ["203.0.113.0/24"] }
vm "arm" {
  size    = "Standard_D4ps_v5"
  image   = "ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "dsvm" {
  size    = "Standard_D4ps_v5"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "urn" {
  size    = "Standard_D4ps_v5"
  image   = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
# Steps that install x86_64 builds are refused on an Arm64 size.
vm "bench" {
  size    = "Standard_D4pds_v5"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "mofed" {}
  step "elbencho" {}
}
