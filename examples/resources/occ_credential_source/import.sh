# NAME, or NAME@GENERATION to keep the generation the source had.
terraform import occ_credential_source.anthropic anthropic@1
