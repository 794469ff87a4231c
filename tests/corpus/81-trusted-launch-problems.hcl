# Trusted Launch needs a Generation 2 image, Secure Boot needs Trusted Launch, and ARM refuses
# Trusted Launch on sizes Resource SKUs mark TrustedLaunchDisabled (issue 29).
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }

vm "old" {
  size           = "Standard_D3_v2"
  trusted_launch = true
  ssh_key        = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

vm "both" {
  size           = "Standard_D4s_v5"
  trusted_launch = false
  secure_boot    = true
  ssh_key        = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}

cluster "train" {
  size        = "Standard_ND40rs_v2"
  image       = "hpc-ubuntu-22.04"
  count       = 2
  secure_boot = true
  ssh_key     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "mofed" {}
  step "beeond" { mount = "/mnt/beeond" }
}

cluster "a100" {
  size        = "Standard_ND96asr_v4"
  image       = "hpc-ubuntu-22.04"
  count       = 2
  secure_boot = true
  ssh_key     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
