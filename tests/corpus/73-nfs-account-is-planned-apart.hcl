azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "nfs" {
  kind = "FileStorage"
  sku  = "Premium_LRS"
  file_share "data" {
    protocol = "NFS"
  }
}
