# NAME, or NAME@GENERATION to keep the generation the configuration had.
terraform import occ_configuration.support support@3
