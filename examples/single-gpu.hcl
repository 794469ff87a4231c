# The smallest useful setup: one GPU VM with the Data Science VM image.
# `dsinfra plan examples/single-gpu.hcl` works as is; pass -var my_ip=<your IP>/32 to use it.

variable "my_ip" { default = "203.0.113.7/32" }

azure { location = "westeurope" }

network "main" { ssh_from = [var.my_ip] }

vm "gpu" {
  size    = "Standard_NC4as_T4_v3" # 1 x T4, the cheapest current GPU size
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("keys/demo.pub") # replace with file("~/.ssh/id_ed25519.pub")

  park {
    at        = "19:00"
    time_zone = "Europe/Amsterdam"
  }
}

output "ssh" { value = "ssh azureuser@${vm.gpu.public_ip}" }
