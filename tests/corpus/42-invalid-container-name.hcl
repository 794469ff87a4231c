azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "Raw_Data" {}
  file_share "x" {}
}
