# With two workspaces a cluster must name one, and only an aml_workspace will do.
experiment = "aml"
azure { location = "southcentralus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
aml_workspace "a" {}
aml_workspace "b" {}
aml_cluster "unsaid" {
  size    = "Standard_ND40rs_v2"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
aml_cluster "wrong" {
  workspace = network.main
  size      = "Standard_ND40rs_v2"
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
