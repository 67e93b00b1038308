package admission

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// SecretBindingEnv is how a Configuration's secret binding reaches the
// gateway (AU6): the Secret's key as an environment variable of the gateway
// container only (never a dedicated harness or a native node), named after
// the binding in upper case with '-' as '_', so that the document refers
// to binding "telegram" as "${TELEGRAM}" (OpenClaw substitutes only
// upper-case names).
type SecretBindingEnv struct {
	Binding string    `json:"binding"`
	EnvVar  string    `json:"env_var"`
	Secret  SecretRef `json:"secret"`
}

var bindingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// secretKey is what a Kubernetes Secret accepts as a key.
var secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// reservedEnv are the variables the platform sets in its containers, and the
// model credential aliases: a binding may not take them over (AU6: a
// binding never supplies the model credential).
var reservedEnv = map[string]bool{
	EnvOpenAIAPIKey: true, EnvAnthropicAPIKey: true,
	"HOME": true, "PATH": true, "TMPDIR": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
	"LOG_FORMAT": true, "RUST_LOG": true, "NODE_OPTIONS": true,
}

var reservedPrefixes = []string{"OPENCLAW_", "CODEX_", "OCC_"}

// BindingEnvVar is the environment variable binding name reaches the gateway as.
func BindingEnvVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// CheckSecretBindings judges a Configuration's secret bindings (AU6): names
// that make a usable, unambiguous variable the platform does not set
// itself, Secret references Kubernetes accepts. It returns the bindings as
// the gateway receives them, sorted by variable. attr is the attribute the
// bindings are reported under.
func CheckSecretBindings(bindings map[string]SecretRef, attr []string) ([]SecretBindingEnv, Errors) {
	var errs Errors
	refuse := func(name, msg string) {
		errs = append(errs, &Error{Class: InvalidRequest, Rule: "AU6", Attribute: append(append([]string{}, attr...), name), Message: msg})
	}
	var out []SecretBindingEnv
	byEnv := map[string]string{}
	names := make([]string, 0, len(bindings))
	for n := range bindings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := bindings[name]
		if !bindingName.MatchString(name) {
			refuse(name, fmt.Sprintf("binding name %q must start with a letter or '_' and hold only letters, digits, '_' and '-': it becomes the gateway's environment variable %s", name, BindingEnvVar(name)))
			continue
		}
		env := BindingEnvVar(name)
		if reservedEnv[env] || hasReservedPrefix(env) {
			refuse(name, fmt.Sprintf("binding %q would set %s, which the platform sets itself or which carries the model credential; rename the binding (model credentials come from the Agent's credential source, never a binding)", name, env))
			continue
		}
		if other, dup := byEnv[env]; dup {
			refuse(name, fmt.Sprintf("bindings %q and %q both become %s; rename one", other, name, env))
			continue
		}
		if !secretKey.MatchString(ref.Key) {
			refuse(name, fmt.Sprintf("key %q is not a valid Secret key (letters, digits, '-', '_' and '.')", ref.Key))
			continue
		}
		byEnv[env] = name
		out = append(out, SecretBindingEnv{Binding: name, EnvVar: env, Secret: ref})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EnvVar < out[j].EnvVar })
	return out, errs
}

func hasReservedPrefix(env string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(env, p) {
			return true
		}
	}
	return false
}

// checkBindingsCompute refuses secret bindings a compute's kind cannot
// project (its row's SecretBindings): an SSH host has no Kubernetes
// Secrets; the host's credentials file supplies channel credentials there.
func checkBindingsCompute(bindings []SecretBindingEnv, c Compute) Errors {
	row := kindRow(c.Kind)
	if len(bindings) == 0 || row.SecretBindings {
		return nil
	}
	instead := ""
	if row.Words.BindingsInstead != "" {
		instead = " and " + row.Words.BindingsInstead
	}
	return Errors{{Class: ResourceConflict, Rule: "AU6", Attribute: []string{"configuration"},
		Message: fmt.Sprintf("the configuration has secret_bindings (%s), which are Kubernetes Secrets; %s cannot project them. "+
			"Remove them%s, or run the Agent on %s", bindings[0].Binding, row.Words.Noun, instead, nouns(kindsWhere(func(k KindSupport) bool { return k.SecretBindings })))}}
}
