azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  name = "Data_Store"
}
