# Seed 1, the dual DSVM: a CPU VM prepares the data, a GPU VM trains on it.
# Both mount the same blob container with blobfuse2 (file cache on the temp disk).
experiment = "dual-dsvm"

variable "ssh_key" {
  description = "Your SSH public key; the examples ship a throwaway demo key"
  default     = file("keys/demo.pub")
}

variable "my_ip" {
  description = "Where you connect from, as a CIDR (your public IP/32)"
  default     = "203.0.113.7/32"
}

azure { location = "eastus" }

network "main" { ssh_from = [var.my_ip] }

storage_account "data" {
  container "datasets" {}
}

vm "prep" {
  size    = "Standard_D4ds_v5" # 4 vCPUs and a 150 GiB temp disk for data preparation
  image   = "dsvm-ubuntu-22.04"
  ssh_key = var.ssh_key
  step "blobfuse2" { container = storage_account.data.container.datasets }
}

vm "gpu" {
  size    = "Standard_NC4as_T4_v3" # 1 x T4, 176 GiB temp disk
  image   = "dsvm-ubuntu-22.04"
  ssh_key = var.ssh_key
  park { at = "19:00" } # deallocated every evening (UTC)
  step "blobfuse2" { container = storage_account.data.container.datasets }
}

output "gpu_ip" { value = vm.gpu.public_ip }
