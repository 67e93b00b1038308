package admission

import (
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// StampPlatformLogging applies AD4 to an admitted document in place:
// logging.level and a matching logging.consoleLevel, JSON console style,
// native OTLP log export disabled (diagnostics.otel.logs = false), and the
// retired logging.redactSensitive key removed (redaction is always on
// upstream, and the gateway would rewrite a file holding the key).
func StampPlatformLogging(doc occconfig.Document, level string) {
	occconfig.Delete(doc, pathRedactSensitive)
	force(doc, pathLoggingLevel, level)
	force(doc, pathLoggingConsoleLevel, level)
	force(doc, pathLoggingConsoleStyle, "json")
	force(doc, pathOTelLogs, false)
}

// CheckLoggingOwnership applies AD5's trust: only a compute driver the
// platform trusts (a kind whose row has DriverLogging) may declare
// driver-managed runtime logging; on any other kind the declaration is
// refused rather than silently turned into platform-owned logging.
func CheckLoggingOwnership(c Compute) Errors {
	row := kindRow(c.Kind)
	if c.Kubernetes().LoggingOwnership != LoggingDriver || row.DriverLogging {
		return nil
	}
	trusted := kindsWhere(func(k KindSupport) bool { return k.DriverLogging })
	return Errors{conflict("AD5", []string{"compute"},
		"logging.ownership = %q may be declared only by a compute driver the platform trusts to own runtime logging (%s); on %s the platform owns logging: remove logging or set ownership = %q",
		LoggingDriver, nouns(trusted), row.Words.Noun, LoggingPlatform)}
}

// force writes value at path, replacing any non-object on the way, so that
// the stamp always lands.
func force(doc occconfig.Document, p occconfig.Path, value any) {
	for i := 1; i < len(p); i++ {
		if v, ok := occconfig.Lookup(doc, p[:i]); ok {
			if _, isObj := v.(map[string]any); !isObj {
				occconfig.Set(doc, p[:i], map[string]any{})
			}
		}
	}
	occconfig.Set(doc, p, value)
}

// PlaceholderCredential is what a harness behind the Credential Gateway
// receives instead of a key; the sandbox egress proxy swaps in the real one
// (AU3): the driver contract's sandboxapi.Placeholder.
const PlaceholderCredential = sandboxapi.Placeholder

// DriverTransform is the sandbox driver's transformation of the native
// configuration before validation and admission (AD2). It works on a copy
// the caller owns; the stored Configuration is never changed. The bundled
// OpenShell driver gives the primary provider a placeholder key when the
// credential comes from the Credential Gateway (AU3).
func DriverTransform(driver string, doc occconfig.Document, c Compute, s CredentialSource) occconfig.Document {
	if driver != DriverOpenShell || s.Method != MethodCredentialSource || c.Kubernetes().CredentialGateway == nil {
		return doc
	}
	sel := agentSelection(doc)
	if sel.Primary == nil {
		return doc
	}
	force(doc, pathProviders.Key(sel.Primary.Provider).Key("apiKey"), PlaceholderCredential)
	return doc
}
