# Each value of an aml_cluster is checked where it is written.
experiment = "aml"
azure { location = "southcentralus" }
aml_workspace "ws" {}
aml_cluster "c" {
  name                          = "9-lives"
  size                          = "Standard_ND40r_v2"
  count                         = 0
  ssh_key                       = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  admin_username                = "admin"
  priority                      = "spot"
  idle_seconds_before_scaledown = -30
  subnet                        = "default"
}
