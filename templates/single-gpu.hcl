# One GPU VM with the Data Science VM image (CUDA, PyTorch, conda), parked every evening.
# Edit, then: dsinfra plan single-gpu.hcl

variable "my_ip" {
  description = "Your public IP as a CIDR, e.g. 203.0.113.7/32 (curl ifconfig.me)"
  type        = string
}

azure { location = "eastus" }

network "main" { ssh_from = [var.my_ip] }

vm "gpu" {
  size    = "Standard_NC4as_T4_v3" # 1 x T4; Standard_NC24ads_A100_v4 for an A100
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("~/.ssh/id_ed25519.pub")

  park {
    at        = "19:00"
    time_zone = "UTC"
  }
}

output "ssh" { value = "ssh azureuser@${vm.gpu.public_ip}" }
