// Package kube is the Kubernetes executor: it builds a client from the
// provider's settings, applies a rendered revision with server-side apply,
// watches it until its startup probe passes, activates it behind a guard the
// API server arbitrates, and reads it back. Every call takes the request
// context (with the timeouts deadline).
package kube

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/homedir"
)

// Settings are the provider's kubernetes connection settings, as the
// hashicorp/kubernetes provider's users know them.
type Settings struct {
	ConfigPath           string
	ConfigPaths          []string
	ConfigContext        string
	Host                 string
	Token                string
	ClusterCACertificate string
	ClientCertificate    string
	ClientKey            string
	Insecure             bool
	Exec                 *ExecSettings
	UserAgent            string
	// ProxyURL is an HTTP(S) or SOCKS5 proxy to the API server;
	// TLSServerName the name the API server's certificate is checked for.
	ProxyURL, TLSServerName string
	// ConfigContextCluster and ConfigContextAuthInfo override the chosen
	// context's cluster and user.
	ConfigContextCluster, ConfigContextAuthInfo string
}

// FromEnv fills every setting left empty from the environment variables
// the hashicorp/kubernetes provider reads (getenv is os.Getenv but in
// tests): KUBE_CONFIG_PATH, KUBE_CONFIG_PATHS, KUBE_CTX, KUBE_CTX_CLUSTER,
// KUBE_CTX_AUTH_INFO, KUBE_HOST, KUBE_TOKEN, KUBE_CLIENT_CERT_DATA,
// KUBE_CLIENT_KEY_DATA, KUBE_CLUSTER_CA_CERT_DATA, KUBE_INSECURE,
// KUBE_PROXY_URL and KUBE_TLS_SERVER_NAME. A setting in the provider
// block wins over its variable.
func FromEnv(s Settings, getenv func(string) string) Settings {
	str := func(v *string, env string) {
		if *v == "" {
			*v = getenv(env)
		}
	}
	str(&s.ConfigPath, "KUBE_CONFIG_PATH")
	if len(s.ConfigPaths) == 0 {
		if v := getenv("KUBE_CONFIG_PATHS"); v != "" {
			s.ConfigPaths = filepath.SplitList(v)
		}
	}
	str(&s.ConfigContext, "KUBE_CTX")
	str(&s.ConfigContextCluster, "KUBE_CTX_CLUSTER")
	str(&s.ConfigContextAuthInfo, "KUBE_CTX_AUTH_INFO")
	str(&s.Host, "KUBE_HOST")
	str(&s.Token, "KUBE_TOKEN")
	str(&s.ClientCertificate, "KUBE_CLIENT_CERT_DATA")
	str(&s.ClientKey, "KUBE_CLIENT_KEY_DATA")
	str(&s.ClusterCACertificate, "KUBE_CLUSTER_CA_CERT_DATA")
	str(&s.ProxyURL, "KUBE_PROXY_URL")
	str(&s.TLSServerName, "KUBE_TLS_SERVER_NAME")
	if !s.Insecure {
		s.Insecure, _ = strconv.ParseBool(getenv("KUBE_INSECURE"))
	}
	return s
}

// ExecSettings is a client-go exec credential plugin.
type ExecSettings struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// QPS and Burst for the provider's client: one client per provider
// instance, shared by every resource, bounded so that a plan of hundreds
// of agents cannot flood the API server.
const (
	QPS   = 50
	Burst = 100
)

// PreflightQPS and PreflightBurst bound the plan's preflight, which only
// reads and dry-runs: 8 requests per new embedded agent (14 when it read
// every name first), more for an update, so that at QPS a plan of 100
// agents waited ~30 s on the client's own limiter, not on the API server. A refresh's reads (Executor.Read, about 5 per agent) share
// them: at QPS a refresh of 200 agents waited ~20 s. The API server's
// priority and fairness still decides what it serves.
const (
	PreflightQPS   = 250
	PreflightBurst = 500
)

// RESTConfig resolves the settings (after FromEnv): the kubeconfig paths
// set, else KUBECONFIG, else ~/.kube/config, else, in a Pod
// (KUBERNETES_SERVICE_HOST set), the in-cluster configuration; host, token,
// certificates, exec, insecure, proxy, TLS server name and the context's
// cluster and user override a kubeconfig, and all but host and the context
// settings the in-cluster configuration (inClusterOverrides). With only
// host set, no kubeconfig is read.
func RESTConfig(s Settings) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	paths := s.ConfigPaths
	if s.ConfigPath != "" {
		paths = append([]string{s.ConfigPath}, paths...)
	}
	if len(paths) == 0 && s.Host == "" {
		// KUBE_CONFIG_PATH(S) came in through FromEnv; KUBECONFIG is read
		// too (the hashicorp/kubernetes provider ignores it): an agent
		// should reach the cluster kubectl reaches unless told otherwise.
		if v := os.Getenv("KUBECONFIG"); v != "" {
			paths = filepath.SplitList(v)
		}
	}
	if len(paths) == 0 && s.Host == "" {
		// The home kubectl reads its config from (client-go's homedir:
		// on Windows the first of HOME, HOMEDRIVE+HOMEPATH and
		// USERPROFILE that holds a .kube\config).
		if home := homedir.HomeDir(); home != "" {
			if p := filepath.Join(home, ".kube", "config"); fileExists(p) {
				paths = []string{p}
			}
		}
	}
	if len(paths) == 0 && s.Host == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		// In a Pod (an HCP Terraform agent, Atlantis, tf-controller) with
		// nothing configured and no ~/.kube/config: its ServiceAccount, as
		// kubectl does.
		cfg, err := inClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes configuration (KUBERNETES_SERVICE_HOST is set, and neither a kubeconfig nor kubernetes.host is): %w; "+
				"mount the Pod's ServiceAccount token, or set kubernetes.config_path or kubernetes.host", err)
		}
		if err := inClusterOverrides(cfg, s); err != nil {
			return nil, err
		}
		return tuned(cfg, s), nil
	}
	for i, p := range paths {
		expanded, err := expandHome(p)
		if err != nil {
			return nil, err
		}
		if !fileExists(expanded) {
			return nil, fmt.Errorf("kubeconfig %q does not exist; set kubernetes.config_path to an existing file, or host with credentials", p)
		}
		paths[i] = expanded
	}
	rules.Precedence = paths

	overrides := &clientcmd.ConfigOverrides{CurrentContext: s.ConfigContext}
	overrides.Context.Cluster, overrides.Context.AuthInfo = s.ConfigContextCluster, s.ConfigContextAuthInfo
	overrides.ClusterInfo.ProxyURL, overrides.ClusterInfo.TLSServerName = s.ProxyURL, s.TLSServerName
	if s.Host != "" {
		overrides.ClusterInfo.Server = s.Host
	}
	if s.ClusterCACertificate != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(s.ClusterCACertificate)
	}
	if s.Insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	if s.Token != "" {
		overrides.AuthInfo.Token = s.Token
	}
	if s.ClientCertificate != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(s.ClientCertificate)
	}
	if s.ClientKey != "" {
		overrides.AuthInfo.ClientKeyData = []byte(s.ClientKey)
	}
	if s.Exec != nil {
		overrides.AuthInfo.Exec = execConfig(s.Exec)
	}
	if len(paths) == 0 && s.Host == "" {
		return nil, errors.New("no Kubernetes connection configured: set the provider's kubernetes.config_path (or KUBE_CONFIG_PATH / KUBECONFIG), or kubernetes.host with credentials")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes connection settings: %w", err)
	}
	return tuned(cfg, s), nil
}

// inClusterConfig is rest.InClusterConfig but in tests: the Pod's
// ServiceAccount token and CA under /var/run/secrets/kubernetes.io/serviceaccount/
// and the API server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT.
var inClusterConfig = rest.InClusterConfig

// inClusterOverrides applies the settings to the in-cluster configuration,
// as they apply to a kubeconfig's: a token, a client certificate or an
// exec plugin replaces the ServiceAccount token; a CA certificate, insecure,
// the proxy and the TLS server name replace the Pod's. The context settings
// name kubeconfig entries, and there is no kubeconfig: an error.
func inClusterOverrides(cfg *rest.Config, s Settings) error {
	for _, c := range []struct{ name, value string }{
		{"config_context", s.ConfigContext}, {"config_context_cluster", s.ConfigContextCluster}, {"config_context_auth_info", s.ConfigContextAuthInfo},
	} {
		if c.value != "" {
			return fmt.Errorf("kubernetes.%s = %q names a kubeconfig entry, but no kubeconfig was found and the provider would use the Pod's ServiceAccount "+
				"(in-cluster configuration): set kubernetes.config_path, or leave %s out", c.name, c.value, c.name)
		}
	}
	if s.Token != "" || s.ClientCertificate != "" || s.ClientKey != "" || s.Exec != nil {
		cfg.BearerToken, cfg.BearerTokenFile = s.Token, ""
	}
	if s.ClientCertificate != "" || s.ClientKey != "" {
		cfg.CertData, cfg.KeyData = []byte(s.ClientCertificate), []byte(s.ClientKey)
	}
	if s.Exec != nil {
		cfg.ExecProvider = execConfig(s.Exec)
	}
	if s.ClusterCACertificate != "" {
		cfg.CAData, cfg.CAFile = []byte(s.ClusterCACertificate), ""
	}
	if s.Insecure {
		cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
	}
	if s.TLSServerName != "" {
		cfg.ServerName = s.TLSServerName
	}
	if s.ProxyURL != "" {
		u, err := url.Parse(s.ProxyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") || u.Host == "" {
			return fmt.Errorf("kubernetes.proxy_url %q is not an http, https or socks5 URL", s.ProxyURL)
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	return nil
}

// execConfig is the client-go exec credential plugin of the settings.
func execConfig(e *ExecSettings) *clientcmdapi.ExecConfig {
	env := make([]clientcmdapi.ExecEnvVar, 0, len(e.Env))
	for k, v := range e.Env {
		env = append(env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
	}
	return &clientcmdapi.ExecConfig{APIVersion: e.APIVersion, Command: e.Command, Args: e.Args, Env: env,
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
}

// tuned sets the client's rate limits and user agent.
func tuned(cfg *rest.Config, s Settings) *rest.Config {
	cfg.QPS, cfg.Burst = QPS, Burst
	if s.UserAgent != "" {
		cfg.UserAgent = s.UserAgent
	}
	return cfg
}

// NewClient builds the clientset for the settings.
func NewClient(s Settings) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := RESTConfig(s)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, cfg, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// expandHome expands a leading "~" to the home kubectl uses
// (homedir.HomeDir), as the hashicorp/kubernetes provider's config_path
// does.
func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := homedir.HomeDir()
		if home == "" {
			return "", errors.New("no home directory to expand ~ in: set HOME, or give the path in full")
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
	}
	return p, nil
}
