package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// The connection settings the hashicorp/kubernetes provider reads from the
// environment fill what the provider block leaves out; the block wins.
func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"KUBE_CONFIG_PATH": "/env/config", "KUBE_CONFIG_PATHS": "/a" + string(os.PathListSeparator) + "/b",
		"KUBE_CTX": "env-ctx", "KUBE_CTX_CLUSTER": "env-cluster", "KUBE_CTX_AUTH_INFO": "env-user",
		"KUBE_HOST": "https://env:6443", "KUBE_TOKEN": "env-token", "KUBE_CLIENT_CERT_DATA": "cert", "KUBE_CLIENT_KEY_DATA": "key",
		"KUBE_CLUSTER_CA_CERT_DATA": "ca", "KUBE_INSECURE": "true", "KUBE_PROXY_URL": "http://proxy:3128", "KUBE_TLS_SERVER_NAME": "api.internal",
	}
	got := FromEnv(Settings{ConfigContext: "block-ctx", Host: "https://block:6443"}, func(k string) string { return env[k] })
	want := Settings{ConfigPath: "/env/config", ConfigPaths: []string{"/a", "/b"}, ConfigContext: "block-ctx", ConfigContextCluster: "env-cluster", ConfigContextAuthInfo: "env-user",
		Host: "https://block:6443", Token: "env-token", ClientCertificate: "cert", ClientKey: "key", ClusterCACertificate: "ca", Insecure: true,
		ProxyURL: "http://proxy:3128", TLSServerName: "api.internal"}
	if got.ConfigPath != want.ConfigPath || len(got.ConfigPaths) != 2 || got.ConfigPaths[1] != "/b" || got.ConfigContext != want.ConfigContext ||
		got.ConfigContextCluster != want.ConfigContextCluster || got.ConfigContextAuthInfo != want.ConfigContextAuthInfo || got.Host != want.Host ||
		got.Token != want.Token || got.ClientCertificate != want.ClientCertificate || got.ClientKey != want.ClientKey ||
		got.ClusterCACertificate != want.ClusterCACertificate || got.Insecure != want.Insecure || got.ProxyURL != want.ProxyURL || got.TLSServerName != want.TLSServerName {
		t.Fatalf("FromEnv = %+v\nwant %+v", got, want)
	}
	if s := FromEnv(Settings{}, func(string) string { return "" }); s.Insecure || s.ConfigPath != "" {
		t.Fatalf("an empty environment set %+v", s)
	}
}

// RESTConfig applies the context, the context's cluster and user
// overrides, the proxy and the TLS server name.
func TestRESTConfig_ContextAndTransportSettings(t *testing.T) {
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: ua, user: {token: token-a}}
- {name: ub, user: {token: token-b}}
contexts:
- {name: ctx-a, context: {cluster: a, user: ua}}
- {name: ctx-b, context: {cluster: b, user: ub}}
current-context: ctx-a
`
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		s              Settings
		host, token    string
		proxy, tlsName bool
	}{
		{"current context", Settings{ConfigPath: path}, "https://a.example:6443", "token-a", false, false},
		{"KUBE_CTX", FromEnv(Settings{ConfigPath: path}, func(k string) string { return map[string]string{"KUBE_CTX": "ctx-b"}[k] }), "https://b.example:6443", "token-b", false, false},
		{"context's cluster and user overridden", Settings{ConfigPath: path, ConfigContextCluster: "b", ConfigContextAuthInfo: "ub"}, "https://b.example:6443", "token-b", false, false},
		{"proxy and TLS server name", Settings{ConfigPath: path, ProxyURL: "http://127.0.0.1:3128", TLSServerName: "api.internal"}, "https://a.example:6443", "token-a", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := RESTConfig(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host || cfg.BearerToken != tc.token {
				t.Fatalf("host %s token %s, want %s %s", cfg.Host, cfg.BearerToken, tc.host, tc.token)
			}
			if (cfg.Proxy != nil) != tc.proxy || (cfg.TLSClientConfig.ServerName == "api.internal") != tc.tlsName {
				t.Fatalf("proxy set %v, server name %q", cfg.Proxy != nil, cfg.TLSClientConfig.ServerName)
			}
		})
	}
}

// In a Pod with no kubeconfig, the ServiceAccount's configuration, with
// the settings that apply to it on top; a context setting, which names a
// kubeconfig entry, is an error. (The acceptance test
// TestAccProvider_InClusterConfiguration mounts a real ServiceAccount.)
func TestRESTConfig_InCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	pod := func() (*rest.Config, error) {
		return &rest.Config{Host: "https://10.0.0.1:443", BearerToken: "sa-token", BearerTokenFile: "/sa/token",
			TLSClientConfig: rest.TLSClientConfig{CAFile: "/sa/ca.crt"}}, nil
	}
	defer func(f func() (*rest.Config, error)) { inClusterConfig = f }(inClusterConfig)
	inClusterConfig = pod

	cfg, err := RESTConfig(Settings{UserAgent: "occ-test"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:443" || cfg.BearerToken != "sa-token" || cfg.BearerTokenFile != "/sa/token" || cfg.CAFile != "/sa/ca.crt" ||
		cfg.UserAgent != "occ-test" || cfg.QPS != QPS {
		t.Fatalf("in-cluster configuration %+v", cfg)
	}

	cfg, err = RESTConfig(Settings{Token: "t", ClusterCACertificate: "ca-pem", ProxyURL: "http://127.0.0.1:3128", TLSServerName: "api.internal"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "t" || cfg.BearerTokenFile != "" || string(cfg.CAData) != "ca-pem" || cfg.CAFile != "" || cfg.Proxy == nil || cfg.ServerName != "api.internal" {
		t.Fatalf("overridden in-cluster configuration %+v", cfg)
	}
	cfg, err = RESTConfig(Settings{Insecure: true, Exec: &ExecSettings{APIVersion: "client.authentication.k8s.io/v1", Command: "get-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Insecure || cfg.CAFile != "" || cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider == nil || cfg.ExecProvider.Command != "get-token" {
		t.Fatalf("insecure, exec in-cluster configuration %+v", cfg)
	}
	cfg, err = RESTConfig(Settings{ClientCertificate: "cert", ClientKey: "key"})
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.CertData) != "cert" || string(cfg.KeyData) != "key" || cfg.BearerToken != "" || cfg.BearerTokenFile != "" {
		t.Fatalf("client certificate in-cluster configuration %+v", cfg)
	}

	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{ConfigContext: "prod"}, `kubernetes.config_context = "prod" names a kubeconfig entry, but no kubeconfig was found`},
		{Settings{ConfigContextAuthInfo: "admin"}, `kubernetes.config_context_auth_info = "admin"`},
		{Settings{ProxyURL: "ftp://proxy"}, `kubernetes.proxy_url "ftp://proxy" is not an http, https or socks5 URL`},
	} {
		if _, err := RESTConfig(tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RESTConfig(%+v) = %v, want an error with %q", tc.s, err, tc.want)
		}
	}

	inClusterConfig = func() (*rest.Config, error) {
		return nil, errors.New("open /var/run/secrets/kubernetes.io/serviceaccount/token: no such file or directory")
	}
	if _, err := RESTConfig(Settings{}); err == nil || !strings.Contains(err.Error(), "in-cluster Kubernetes configuration (KUBERNETES_SERVICE_HOST is set") ||
		!strings.Contains(err.Error(), "serviceaccount/token: no such file") {
		t.Errorf("without a token: %v", err)
	}
	// A host, or a kubeconfig, wins over the Pod's.
	if cfg, err := RESTConfig(Settings{Host: "https://other:6443", Token: "t"}); err != nil || cfg.Host != "https://other:6443" {
		t.Errorf("host set: %v, %v", cfg, err)
	}
}

// config_path "~/…" is the home kubectl reads (client-go's homedir); a
// machine without one says so.
func TestExpandHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for in, want := range map[string]string{"~": home, "~/.kube/config": home + "/.kube/config", "/etc/kube": "/etc/kube", "~other/x": "~other/x"} {
		if got, err := expandHome(in); err != nil || got != want {
			t.Errorf("expandHome(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	t.Setenv("HOME", "")
	if _, err := expandHome("~/x"); err == nil || !strings.Contains(err.Error(), "HOME") {
		t.Errorf("expandHome without a home: %v", err)
	}
}
