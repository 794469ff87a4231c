# The compute goes where its workspace is: an existing workspace in brazilsouth cannot take
# ND40rs_v2, which is not offered there, even though the experiment's location offers it.
azure { location = "southcentralus" }
aml_workspace "shared" {
  existing = true
  name     = "cosmoflow-ws"
  location = "brazilsouth"
}
aml_cluster "beeond" {
  size    = "Standard_ND40rs_v2"
  count   = 4
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
