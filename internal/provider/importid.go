package provider

import (
	"fmt"
	"strconv"
	"strings"
)

// parseImportID reads "NAME" or "NAME@GENERATION".
func parseImportID(id string) (string, int64, error) {
	name, genText, hasGen := strings.Cut(id, "@")
	if !isDNSLabel(name) {
		return "", 0, fmt.Errorf("import ID %q must be NAME or NAME@GENERATION, where NAME is the object's name (a DNS label)", id)
	}
	if !hasGen {
		return name, 0, nil
	}
	gen, err := strconv.ParseInt(genText, 10, 64)
	if err != nil || gen < 1 {
		return "", 0, fmt.Errorf("import ID %q: GENERATION must be a positive whole number, such as %s@3", id, name)
	}
	return name, gen, nil
}
