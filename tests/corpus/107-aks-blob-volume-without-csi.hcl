azure { location = "eastus" }
storage_account "lake" {
  container "images" {}
}
aks "train" {
  api_server_from = ["203.0.113.7/32"]
  blob_volume "Images" {
    container = storage_account.lake.container.images
    namespace = "ML"
  }
}
