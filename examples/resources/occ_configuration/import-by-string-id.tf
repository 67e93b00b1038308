# NAME, or NAME@GENERATION to keep the generation the configuration had.
# It lives only in state, so `terraform plan -generate-config-out` can write
# only its name: write its settings yourself (an agent imported with
# -generate-config-out carries them, as values, in its references).
import {
  to = occ_configuration.support
  id = "support@3"
}
