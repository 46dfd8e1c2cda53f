package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/retrybroker"

// kubeVersion is the Kubernetes version the chart is rendered for: the
// chart needs 1.30 or later (the preStop sleep action).
const kubeVersion = "1.31.0"

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart renders; decoding strictly into it catches a misspelt field.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is a chart rendering decoded into the API types.
type rendered struct {
	deployments     []*appsv1.Deployment
	configMaps      []*corev1.ConfigMap
	services        []*corev1.Service
	serviceAccounts []*corev1.ServiceAccount
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	netpols         []*networkingv1.NetworkPolicy
	monitors        []*serviceMonitor
}

// decodeStrict decodes one YAML document into the API type its apiVersion
// and kind name, refusing unknown and duplicate fields, and matching field
// names case-sensitively, as the API server's strict field validation does
// (encoding/json alone would take readOnlyRootFileSystem for
// readOnlyRootFilesystem).
func (r *rendered) decodeStrict(doc []byte) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return err
	}
	strict := func(v any) error {
		strictErrs, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			return err
		}
		return errors.Join(strictErrs...)
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		v := &appsv1.Deployment{}
		err = strict(v)
		r.deployments = append(r.deployments, v)
	case "v1 ConfigMap":
		v := &corev1.ConfigMap{}
		err = strict(v)
		r.configMaps = append(r.configMaps, v)
	case "v1 Service":
		v := &corev1.Service{}
		err = strict(v)
		r.services = append(r.services, v)
	case "v1 ServiceAccount":
		v := &corev1.ServiceAccount{}
		err = strict(v)
		r.serviceAccounts = append(r.serviceAccounts, v)
	case "policy/v1 PodDisruptionBudget":
		v := &policyv1.PodDisruptionBudget{}
		err = strict(v)
		r.pdbs = append(r.pdbs, v)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		v := &autoscalingv2.HorizontalPodAutoscaler{}
		err = strict(v)
		r.hpas = append(r.hpas, v)
	case "networking.k8s.io/v1 NetworkPolicy":
		v := &networkingv1.NetworkPolicy{}
		err = strict(v)
		r.netpols = append(r.netpols, v)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		v := &serviceMonitor{}
		err = strict(v)
		r.monitors = append(r.monitors, v)
	default:
		return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll decodes every non-empty document of a helm template output.
func decodeAll(out []byte) (*rendered, error) {
	r := &rendered{}
	for _, doc := range docSep.Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		if err := r.decodeStrict([]byte(doc)); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, doc)
		}
	}
	return r, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func helmTemplate(t *testing.T, args ...string) []byte {
	t.Helper()
	return run(t, tool(t, "helm"), append([]string{"template", "rb", chartDir, "--kube-version", kubeVersion}, args...)...)
}

// valueSets are the chart's CI value files: default, ha, redis-cluster, tls.
func valueSets(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]string{}
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = f
	}
	for _, want := range []string{"default", "ha", "redis-cluster", "tls"} {
		if sets[want] == "" {
			t.Fatalf("value set %s missing under %s/ci", want, chartDir)
		}
	}
	return sets
}

// TestChartLintsAndDecodesStrictly lints and renders the chart for every
// value set, decodes every object strictly into the k8s.io/api types, and
// checks what the deployment must have whatever the values: probes,
// security, shutdown, availability, connection age, and a mount for every
// file a flag names.
func TestChartLintsAndDecodesStrictly(t *testing.T) {
	helm := tool(t, "helm")
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			run(t, helm, "lint", "--strict", chartDir, "-f", file)
			r, err := decodeAll(helmTemplate(t, "-f", file))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.deployments) != 1 || len(r.configMaps) != 1 || len(r.services) != 1 || len(r.pdbs) != 1 {
				t.Fatalf("want one Deployment, ConfigMap, Service and PodDisruptionBudget, got %d %d %d %d",
					len(r.deployments), len(r.configMaps), len(r.services), len(r.pdbs))
			}
			checkDeployment(t, r.deployments[0], name == "tls")
			checkTasks(t, r.deployments[0], name == "ha")
			checkConfig(t, r.configMaps[0])
			if name == "ha" {
				if len(r.hpas) != 1 || len(r.monitors) != 1 || len(r.netpols) != 1 {
					t.Fatalf("ha: want an HPA, a ServiceMonitor and a NetworkPolicy, got %d %d %d", len(r.hpas), len(r.monitors), len(r.netpols))
				}
				if r.deployments[0].Spec.Replicas != nil {
					t.Error("ha: with the HPA on, the Deployment must not set replicas")
				}
			}
		})
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment, tls bool) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem not read-only")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Error("container may run as root")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Error("capabilities not all dropped")
	}
	if psc := pod.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seccomp profile is not RuntimeDefault")
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		switch {
		case p == nil:
			t.Errorf("no %s probe", name)
		case tls && p.TCPSocket == nil:
			t.Errorf("tls: %s probe is not TCP (the kubelet's gRPC probe speaks plaintext only)", name)
		case !tls && p.GRPC == nil:
			t.Errorf("%s probe is not gRPC", name)
		case !tls && name == "readiness" && (p.GRPC.Service == nil || *p.GRPC.Service != ""):
			t.Errorf("readiness probe does not check the overall health \"\": %v", p.GRPC.Service)
		}
	}
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	shutdown, err := time.ParseDuration(args["--shutdown-timeout"])
	if err != nil {
		t.Fatalf("--shutdown-timeout: %v", err)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Fatal("no preStop sleep")
	}
	drain := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + shutdown
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v does not exceed preStop + --shutdown-timeout (%v)", pod.TerminationGracePeriodSeconds, drain)
	}
	if age, err := time.ParseDuration(args["--max-connection-age"]); err != nil || age <= 0 {
		t.Errorf("--max-connection-age not set: %q", args["--max-connection-age"])
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Error("no topology spread")
	}
	// Every file a flag names is in a mounted volume, and every mount has
	// a volume.
	vols := map[string]bool{}
	for _, v := range pod.Volumes {
		vols[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if !vols[m.Name] {
			t.Errorf("mount %s has no volume", m.Name)
		}
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
	}
	for k, v := range args {
		if !strings.HasPrefix(v, "/") {
			continue
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(v, m.MountPath+"/") {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("%s=%s is in no mounted volume", k, v)
		}
	}
}

// checkTasks: with tasks on (the ha value set), every replica gets the one
// PostgreSQL store (--tasks-postgres with a URL that holds no password),
// the password from its Secret as PGPASSWORD (the driver reads it; it is
// in neither the pod spec nor the command line), the key and callback
// secret files, and the rescue bound; with tasks off, no task flag.
func checkTasks(t *testing.T, d *appsv1.Deployment, on bool) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		if strings.HasPrefix(k, "--tasks-") {
			args[k] = v
		}
	}
	if !on {
		if len(args) != 0 || len(c.Env) != 0 {
			t.Errorf("tasks off, yet task flags %v and env %v", args, c.Env)
		}
		return
	}
	u, err := url.Parse(args["--tasks-postgres"])
	if err != nil || u.Scheme != "postgres" || u.Host == "" {
		t.Fatalf("--tasks-postgres=%q: %v", args["--tasks-postgres"], err)
	}
	if _, has := u.User.Password(); has {
		t.Error("the --tasks-postgres URL holds a password")
	}
	for _, k := range []string{"--tasks-key-file", "--tasks-callback-secret-file", "--tasks-rescue-after", "--tasks-postgres-max-conns"} {
		if args[k] == "" {
			t.Errorf("no %s", k)
		}
	}
	if len(c.Env) != 1 || c.Env[0].Name != "PGPASSWORD" || c.Env[0].Value != "" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.SecretKeyRef == nil || c.Env[0].ValueFrom.SecretKeyRef.Name != "retrybroker-tasks-db" {
		t.Errorf("PGPASSWORD is not taken from the Secret: %+v", c.Env)
	}
}

// checkConfig runs broker config check on the rendered configuration.
func checkConfig(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(f, []byte(cm.Data["broker.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, brokerBin, "config", "check", f)
}

// TestChartDecodeIsStrict shows that the strict decoding catches a
// misspelt field: without it, the chart tests would pass a typo that
// Kubernetes ignores (or rejects at apply time).
func TestChartDecodeIsStrict(t *testing.T) {
	out := helmTemplate(t)
	bad := bytes.Replace(out, []byte("readOnlyRootFilesystem:"), []byte("readOnlyRootFileSystem:"), 1)
	if bytes.Equal(bad, out) {
		t.Fatal("rendering has no readOnlyRootFilesystem")
	}
	if _, err := decodeAll(bad); err == nil || !strings.Contains(err.Error(), "readOnlyRootFileSystem") {
		t.Fatalf("a misspelt field decoded without error: %v", err)
	}
}

// TestChartRefusesShortGracePeriod: a termination grace period that does
// not cover the preStop delay and the drain fails to render, and so does a
// drain the chart cannot compare.
func TestChartRefusesShortGracePeriod(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"terminationGracePeriodSeconds=20", "must exceed"}, // 5 s preStop + 15 s drain
		{"broker.shutdownTimeout=1m", "must exceed"},        // 5 s + 60 s > 30 s
		{"broker.shutdownTimeout=1m30s", "whole seconds, minutes or hours"},
		{"tasks.enabled=true", "tasks.postgres.url is required"},
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "rb", chartDir, "--kube-version", kubeVersion, "--set", tc.set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("helm template --set %s: err %v, want %q\n%s", tc.set, err, tc.want, out)
		}
	}
}

// TestChartRefusesMisspeltValues: values.schema.json refuses a value the
// chart does not know (Helm would ignore it, and a Redis password would
// silently not be mounted) and a Redis mode it does not have.
func TestChartRefusesMisspeltValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"redis.passwrdSecret=x", "passwrdSecret"},
		{"redis.mode=clustr", "/redis/mode"},
		{"broker.maxConnectionAge=5 minutes", "/broker/maxConnectionAge"},
		{"credentials[0].name=github", "secret"},
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "rb", chartDir, "--kube-version", kubeVersion, "--set", tc.set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("helm template --set %s: err %v, want %q\n%s", tc.set, err, tc.want, out)
		}
	}
}
