# Terraform 1.12 and later: the same import by the resource's identity.
import {
  to       = occ_compute.prod
  identity = { name = "prod" }
}
