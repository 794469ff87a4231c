# A cluster reading a premium NFS share through a local FS-Cache on each node's temp disk,
# then benchmarking it with elbencho from the head node.

variable "my_ip" { default = "203.0.113.7/32" }

azure { location = "westeurope" }

network "main" { ssh_from = [var.my_ip] }

storage_account "nfs" {
  kind = "FileStorage"
  sku  = "Premium_LRS"
  file_share "data" {
    quota_gb = 1024
    protocol = "NFS"
  }
}

cluster "readers" {
  size            = "Standard_D16ds_v5"
  count           = 3
  placement_group = false
  ssh_key         = file("keys/demo.pub")

  step "nfs_cache" { share = storage_account.nfs.file_share.data }
  step "elbencho" {
    dir   = "/mnt/nfs/bench"
    scope = "head"
  }
}
