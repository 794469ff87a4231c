# Two DSVMs sharing an Azure Files share over SMB, plus a data disk that can move between them
# (edit `attach_to` and plan: the VMs change in place, the disk and its data stay).

variable "my_ip" { default = "203.0.113.7/32" }

azure { location = "eastus" }

network "main" { ssh_from = [var.my_ip] }

storage_account "shared" {
  file_share "work" { quota_gb = 512 }
}

disk "datasets" {
  size_gb   = 1024
  sku       = "Premium_LRS"
  attach_to = vm.prep
  lun       = 0
  mount     = "/data" # formatted (ext4) only while blank; unmounted here before it moves
  lifecycle { prevent_destroy = true }
}

vm "prep" {
  size    = "Standard_D8s_v5"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("keys/demo.pub")
  step "azure_files" { share = storage_account.shared.file_share.work }
}

vm "train" {
  size    = "Standard_NC24ads_A100_v4"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("keys/demo.pub")
  park { at = "20:00" }
  step "azure_files" { share = storage_account.shared.file_share.work }
}
