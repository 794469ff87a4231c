# Mistakes in the top level and in `locals`, each reported where it is written.
experiment = 5
experimnt  = "cf"
network    = {}
storage    = "x"

azure { location = "eastus" }
azure { location = "westus2" }

locals {
  a = 1
  nested {}
}

locals {
  a = 2
}
