# A compute is a logical object: import records its name, and the next plan
# fills its settings from configuration without writing anything remote.
terraform import occ_compute.prod prod
