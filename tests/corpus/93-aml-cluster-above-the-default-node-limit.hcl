# Azure Machine Learning gives a cluster whose nodes talk to each other 100 nodes by default.
experiment = "aml"
azure { location = "southcentralus" }
aml_workspace "ws" {}
aml_cluster "big" {
  size    = "Standard_ND40rs_v2"
  count   = 128
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
