# An existing workspace is read by its name and never changed; a new one goes in the
# experiment's resource group and location.
azure { location = "eastus" }
aml_workspace "shared" {
  existing           = true
  resource_group     = "ml-rg"
  container_registry = true
}
aml_workspace "fresh" {
  resource_group = "ml-rg"
  name           = "_fresh"
}
