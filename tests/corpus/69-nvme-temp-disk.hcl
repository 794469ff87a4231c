# The v6 and newer `d` sizes have local NVMe disks, not a temp disk mounted at boot (issue 29): a
# generated step mounts the NVMe as the temp disk when every size the block may get has it; with
# a fallback size of another kind, a step that keeps its data under `{temp}` is refused there.
azure { location = "eastus" }
network "main" { ssh_from = ["198.51.100.0/24"] }

cluster "scratch" {
  sizes   = ["Standard_D8ds_v6", "Standard_D8ds_v5"]
  image   = "ubuntu-22.04"
  count   = 2
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra"
  step "beeond" { mount = "/mnt/beeond" }
}
