# Issue 29 item 6: the V100 HPC image is Generation 2 (the shared image table says so, though its
# SKU does not): no diagnostic. An image outside the table whose SKU does not say is warned on a
# size that boots one generation only, not refused: Azure knows, and decides at create.
experiment = "urns"
azure { location = "eastus" }
network "main" { ssh_from = ["203.0.113.0/24"] }
vm "v100" {
  size    = "Standard_ND40rs_v2"
  image   = "microsoft-dsvm:ubuntu-hpc:2204-v100:latest"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
vm "ngc" {
  size    = "Standard_ND40rs_v2"
  image   = "nvidia:ngc_azure_17_11:ngc-base-version-24_03_4:latest"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
}
