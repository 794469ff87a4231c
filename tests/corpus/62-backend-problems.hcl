# Every mistake a backend block can hold, reported at once.
variable "team" { default = "ml" }

azure { location = "eastus" }

backend "azurblob" {
  account   = "ExpState"
  container = "tf_state"
  key       = "states/"
  endpoint  = "https://${var.team}.blob.core.windows.net"
  sas_env   = "sv=2026-04-06&sig=x"
  acount    = "expstate01"
}

backend "azureblob" {
  account   = "expstate01"
  container = "tfstate"
  key       = "exp.json"
}
