# Alluxio over Blob: a two-node cluster caching a container in memory, mounted with FUSE.

variable "my_ip" { default = "203.0.113.7/32" }

azure { location = "eastus" }

network "main" { ssh_from = [var.my_ip] }

storage_account "lake" {
  container "images" {}
}

cluster "cache" {
  size    = "Standard_E16s_v5"
  count   = 2
  ssh_key = file("keys/demo.pub")

  step "alluxio" {
    container = storage_account.lake.container.images
    memory_gb = 32
  }
  step "script" {
    name   = "warm-up"
    script = <<EOT
ls -R /alluxio-fuse > /dev/null
EOT
  }
}
