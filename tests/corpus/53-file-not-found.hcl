azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = file("~/.ssh/id_ed25519.pub")
}
