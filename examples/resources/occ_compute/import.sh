# A compute's settings live in state: import records its name, and the next
# apply fills them in from configuration as an in-place update.
terraform import occ_compute.prod prod
