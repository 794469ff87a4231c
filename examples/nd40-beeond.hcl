# Seed 2, CosmoFlow: 4 x ND40rs_v2 (8 V100 each, InfiniBand) in a proximity placement group.
# Steps run in order: MOFED drivers -> BeeOND scratch on the temp disks -> stage the dataset.
experiment = "cosmoflow"

variable "ssh_key" { default = file("keys/demo.pub") }
variable "my_ip" { default = "203.0.113.7/32" }

azure { location = "southcentralus" }

network "hpc" { ssh_from = [var.my_ip] }

storage_account "data" {
  container "cosmoflow" {} # gzip-encoded TFRecords
  file_share "results" { quota_gb = 1024 }
}

sas "read" { # read + list, valid for 72 hours from signing
  container  = storage_account.data.container.cosmoflow
  expires_in = "72h"
}

cluster "train" {
  size    = "Standard_ND40rs_v2"
  count   = 4
  image   = "hpc-ubuntu-22.04" # Generation 2, as ND40rs_v2 requires
  ssh_key = var.ssh_key

  step "mofed" {}
  step "beeond" { mount = "/mnt/scratch" }
  step "stage" {
    from       = storage_account.data.container.cosmoflow
    sas        = sas.read
    prefix     = "cosmoUniverse_2019_05_4parE_tf"
    to         = "/mnt/scratch/cosmoflow"
    decompress = true
  }
}

output "head_ip" { value = cluster.train.head_public_ip }
