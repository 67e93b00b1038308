# A compute's settings live in state: import records its name, and the next
# apply fills them in from configuration as an in-place update. So
# `terraform plan -generate-config-out` can write only its name: write its
# settings yourself (an agent imported with -generate-config-out carries
# them, as values, in its references).
import {
  to = occ_compute.prod
  id = "prod"
}
