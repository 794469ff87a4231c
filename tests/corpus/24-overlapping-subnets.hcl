azure { location = "eastus" }
network "main" {
  ssh_from = ["198.51.100.0/24"]
  subnet "a" { cidr = "10.0.1.0/24" }
  subnet "b" { cidr = "10.0.1.128/25" }
  subnet "c" { cidr = "10.0.2.5/24" }
}
