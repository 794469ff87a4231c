# AmlCompute takes one admin public key (sshSettings.adminPublicKey), not a list.
experiment = "aml"
azure { location = "southcentralus" }
aml_workspace "ws" {}
aml_cluster "beeond" {
  size    = "Standard_ND40rs_v2"
  count   = 4
  ssh_key = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"]
}
