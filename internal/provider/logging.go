package provider

import "strings"

// Logging levels the provider's logs honour: its own (tflog) and those of
// terraform-plugin-go and the framework. Each defaults to TRACE when unset.
var logLevels = []string{"TF_LOG_PROVIDER_OCC", "TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"}

// QuietLogs returns the logging levels to turn off because nobody asked for
// the provider's logs. Unless an environment variable sets a level, the
// plugin libraries write every log line at TRACE to the plugin's stderr,
// and Terraform (or OpenTofu) decodes each line and throws it away unless
// TF_LOG or TF_LOG_PROVIDER asks for it: at hundreds of resources that is a
// quarter of a plan's time (terraform-plugin-framework issue 1269). Any
// TF_LOG* or TOFU_LOG* setting other than TF_LOG_CORE and TF_LOG_PATH
// leaves every level as the libraries set it.
func QuietLogs(environ []string) []string {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" || name == "TF_LOG_CORE" || name == "TF_LOG_PATH" || name == "TF_LOG_PATH_MASK" {
			continue
		}
		if strings.HasPrefix(name, "TF_LOG") || strings.HasPrefix(name, "TOFU_LOG") {
			return nil
		}
	}
	return logLevels
}
