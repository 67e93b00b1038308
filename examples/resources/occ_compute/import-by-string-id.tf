# A compute's settings live in state: import records its name, and the next
# apply fills them in from configuration as an in-place update.
import {
  to = occ_compute.prod
  id = "prod"
}
