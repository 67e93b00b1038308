// Package kube is the Kubernetes executor: it builds a client from the
// provider's settings, applies a rendered revision with server-side apply,
// watches it until its startup probe passes, activates it behind a guard the
// API server arbitrates, and reads it back. Every call takes the request
// context (with the timeouts deadline).
package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

// RESTConfig resolves the settings: explicit kubeconfig paths, then
// KUBE_CONFIG_PATH, KUBECONFIG and ~/.kube/config, with host, token,
// certificates, exec and insecure as overrides. With only host set, no
// kubeconfig is read.
func RESTConfig(s Settings) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	paths := s.ConfigPaths
	if s.ConfigPath != "" {
		paths = append([]string{s.ConfigPath}, paths...)
	}
	if len(paths) == 0 {
		for _, env := range []string{"KUBE_CONFIG_PATH", "KUBECONFIG"} {
			if v := os.Getenv(env); v != "" {
				paths = filepath.SplitList(v)
				break
			}
		}
	}
	if len(paths) == 0 && s.Host == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if p := filepath.Join(home, ".kube", "config"); fileExists(p) {
				paths = []string{p}
			}
		}
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
		env := make([]clientcmdapi.ExecEnvVar, 0, len(s.Exec.Env))
		for k, v := range s.Exec.Env {
			env = append(env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
		overrides.AuthInfo.Exec = &clientcmdapi.ExecConfig{APIVersion: s.Exec.APIVersion, Command: s.Exec.Command, Args: s.Exec.Args, Env: env,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	}
	if len(paths) == 0 && s.Host == "" {
		return nil, errors.New("no Kubernetes connection configured: set the provider's kubernetes.config_path (or KUBE_CONFIG_PATH / KUBECONFIG), or kubernetes.host with credentials")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes connection settings: %w", err)
	}
	cfg.QPS, cfg.Burst = QPS, Burst
	if s.UserAgent != "" {
		cfg.UserAgent = s.UserAgent
	}
	return cfg, nil
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

func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
	}
	return p, nil
}
