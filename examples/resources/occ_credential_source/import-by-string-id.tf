# NAME, or NAME@GENERATION to keep the generation the source had.
import {
  to = occ_credential_source.anthropic
  id = "anthropic@1"
}
