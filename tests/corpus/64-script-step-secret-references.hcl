azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }
storage_account "data" {
  container "raw" {}
}
sas "read" { container = storage_account.data.container.raw }
vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "script" {
    name        = "wrong-kinds"
    script      = "true"
    sas         = storage_account.data.container.raw
    storage_key = sas.read
  }
  step "script" {
    name        = "quoted"
    script      = "true"
    sas         = "sas.read"
    storage_key = storage_account.data.container.raw
  }
  step "script" {
    name   = "fetches"
    script = "true"
    fetch  = ["/out/a.csv", "results/b.csv"]
  }
  step "script" {
    name   = "same-file-name"
    script = "true"
    fetch  = ["/out/a.csv", "/other/a.csv"]
  }
}
