package provider

import (
	"slices"
	"testing"
)

func TestQuietLogs_OnlyWhenNobodyAsked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		quiet   bool
	}{
		{"nothing asked", []string{"HOME=/root", "PATH=/bin"}, true},
		{"core logs only", []string{"TF_LOG_CORE=TRACE", "TF_LOG_PATH=/tmp/tf.log"}, true},
		{"empty TF_LOG", []string{"TF_LOG="}, true},
		{"TF_LOG", []string{"TF_LOG=DEBUG"}, false},
		{"TF_LOG=JSON", []string{"TF_LOG=JSON"}, false},
		{"provider logs", []string{"TF_LOG_PROVIDER=INFO"}, false},
		{"this provider's logs", []string{"TF_LOG_PROVIDER_OCC=INFO"}, false},
		{"framework logs", []string{"TF_LOG_SDK_FRAMEWORK=TRACE"}, false},
		{"OpenTofu", []string{"TOFU_LOG=DEBUG"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QuietLogs(tc.environ)
			if tc.quiet != (len(got) > 0) {
				t.Fatalf("QuietLogs(%q) = %q, want quiet = %v", tc.environ, got, tc.quiet)
			}
			if tc.quiet && !slices.Contains(got, "TF_LOG_SDK_FRAMEWORK") {
				t.Fatalf("QuietLogs(%q) = %q: the framework's level must be among them", tc.environ, got)
			}
		})
	}
}
