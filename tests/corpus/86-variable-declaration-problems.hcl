# Mistakes in variable declarations, a var file and the `azure` block's endpoint.
azure {
  location = "eastus"
  endpoint = "management.azure.com"
}

variable "size" { type = strng }

variable "base" { default = var.size }

variable "nodes" {
  type    = number
  default = 1
  validation {
    error_message = "at least one node"
  }
}
