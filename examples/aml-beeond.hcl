# BeeOND on Azure Machine Learning: 4 x ND40rs_v2 (8 V100 each, InfiniBand) as one fixed-size
# AmlCompute cluster with SSH. BeeOND pools the nodes' local NVMe/temp disks into one scratch file
# system, a dataset is staged onto it from Blob, and elbencho measures it.
#
# AML nodes mount their local disk at /mnt (Azure Batch keeps its own files under /mnt/batch on
# it), not at /mnt/resource: `{temp}` resolves to whichever the node has, so BeeOND's storage
# directory (`data_dir`, by default "{temp}/beeond") is /mnt/beeond there.
experiment = "aml-beeond"

variable "ssh_key" { default = file("keys/demo.pub") }

azure { location = "southcentralus" }

# dsinfra creates the workspace and what Azure requires of one (storage account, key vault,
# Application Insights and its Log Analytics workspace). To use a workspace you already have
# instead (read only: never created, changed or deleted by dsinfra), write:
#
#   aml_workspace "ws" {
#     existing       = true
#     name           = "cosmoflow-ws"
#     resource_group = "ml-rg"          # default: azure.resource_group
#     location       = "southcentralus" # default: azure.location; the cluster goes there too
#   }
aml_workspace "ws" {}

storage_account "data" {
  container "cosmoflow" {} # gzip-encoded TFRecords
}

sas "read" { # read + list, valid for 72 hours from signing
  container  = storage_account.data.container.cosmoflow
  expires_in = "72h"
}

aml_cluster "beeond" {
  workspace = aml_workspace.ws
  size      = "Standard_ND40rs_v2"
  count     = 4 # fixed size: min = max, so autoscaling never takes a node (and its scratch)
  ssh_key   = var.ssh_key

  step "beeond" { mount = "/mnt/scratch" }
  step "stage" {
    from       = storage_account.data.container.cosmoflow
    sas        = sas.read
    prefix     = "cosmoUniverse_2019_05_4parE_tf"
    to         = "/mnt/scratch/cosmoflow"
    decompress = true
  }
  step "elbencho" { dir = "/mnt/scratch/elbencho" }
}

output "compute" { value = aml_cluster.beeond.name }
