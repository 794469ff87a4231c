azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  file_share "scratch" {
    protocol = "NFS"
    quota_gb = 200000
  }
}
