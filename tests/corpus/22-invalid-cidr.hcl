azure { location = "eastus" }
network "main" {
  address_space = "10.0.0.0/33"
  ssh_from      = ["198.51.100.0/24"]
}
