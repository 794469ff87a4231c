azure { location = "eastus" }
storage_account "nfs" {
  kind = "FileStorage"
  sku  = "Premium_LRS"
  file_share "data" {
    protocol = "NFS"
  }
}
