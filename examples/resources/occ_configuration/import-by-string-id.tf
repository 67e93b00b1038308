# NAME, or NAME@GENERATION to keep the generation the configuration had.
import {
  to = occ_configuration.support
  id = "support@3"
}
