azure { location = "eastus" }
network "main" {
  address_space = "10.0.0.0/16"
  ssh_from      = ["198.51.100.0/24"]
  subnet "gpu" { cidr = "10.1.0.0/24" }
}
