azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "nfs" {
  kind = "FileStorage"
  sku  = "Premium_LRS"
  file_share "data" {
    quota_gb = 1024
    protocol = "NFS"
  }
}
vm "reader" {
  size    = "Standard_D2s_v3"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "nfs_cache" {
    export  = "10.0.0.200:/export/data"
    version = "4.3"
  }
  step "nfs_cache" {
    name    = "share"
    share   = storage_account.nfs.file_share.data
    version = 3
  }
  step "nfs_cache" {
    name    = "v4-only"
    export  = "10.0.0.201:/export/data"
    version = 4.2
  }
}
