resource "occ_compute" "prod" {
  name = "prod"
  kubernetes = {
    namespace      = "occ-acme"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "workers" }
  }
}

data "occ_installation" "prod" {
  compute = occ_compute.prod
}

output "execution_modes" {
  value = data.occ_installation.prod.execution_modes # ["embedded"]: dedicated OpenClaw is refused (ND6)
}
