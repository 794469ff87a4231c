# A backend block needs its account, container and key, as text.
azure { location = "eastus" }

backend "azureblob" {
  account  = 42
  endpoint = "acct.blob.core.windows.net"
}
