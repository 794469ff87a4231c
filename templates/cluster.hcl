# An InfiniBand GPU cluster with a shared BeeOND scratch and a dataset staged from Blob.

variable "my_ip" {
  description = "Your public IP as a CIDR, e.g. 203.0.113.7/32"
  type        = string
}

variable "nodes" {
  type    = number
  default = 2
  validation {
    condition     = var.nodes >= 1 && var.nodes <= 16
    error_message = "nodes must be between 1 and 16"
  }
}

azure { location = "southcentralus" }

network "hpc" { ssh_from = [var.my_ip] }

storage_account "data" {
  container "dataset" {}
}

sas "read" {
  container  = storage_account.data.container.dataset
  expires_in = "72h"
}

cluster "train" {
  size    = "Standard_ND96asr_v4" # 8 x A100, InfiniBand
  count   = var.nodes
  image   = "hpc-ubuntu-22.04"
  ssh_key = file("~/.ssh/id_ed25519.pub")

  step "mofed" {}
  step "beeond" {}
  step "stage" {
    from = storage_account.data.container.dataset
    sas  = sas.read
  }
}

output "head_ip" { value = cluster.train.head_public_ip }
