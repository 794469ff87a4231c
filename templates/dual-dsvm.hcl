# A CPU VM to prepare data and a GPU VM to train, sharing one blob container (blobfuse2).
# Both sizes have a temp disk (the `d` in D4ds_v5), where blobfuse2 keeps its file cache.

variable "my_ip" {
  description = "Your public IP as a CIDR, e.g. 203.0.113.7/32"
  type        = string
}

azure { location = "eastus" }

network "main" { ssh_from = [var.my_ip] }

storage_account "data" {
  container "datasets" {}
}

vm "prep" {
  size    = "Standard_D4ds_v5"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("~/.ssh/id_ed25519.pub")
  step "blobfuse2" { container = storage_account.data.container.datasets }
}

vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("~/.ssh/id_ed25519.pub")
  park { at = "19:00" }
  step "blobfuse2" { container = storage_account.data.container.datasets }
}

output "gpu_ip" { value = vm.gpu.public_ip }
