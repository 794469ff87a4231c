# A new workspace is named <experiment>-<label>, and Azure allows 3 to 33 characters.
experiment = "cosmoflow-beeond-scaling-study"
azure { location = "southcentralus" }
aml_workspace "workspace" {}
