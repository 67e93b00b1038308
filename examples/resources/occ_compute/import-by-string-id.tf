# A compute is a logical object: import records its name, and the plan
# fills its settings from configuration without writing anything remote.
import {
  to = occ_compute.prod
  id = "prod"
}
