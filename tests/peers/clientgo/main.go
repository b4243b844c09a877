// Command clientgo-elector contends for a coordination.k8s.io/v1 Lease with client-go's
// tools/leaderelection and a resourcelock.LeaseLock, the reference implementation, so that tests
// and benchmarks can run it next to k8slease on one Lease.
//
// It prints one JSON line per event on stdout ("started_leading", "stopped_leading",
// "new_leader"; see events.go). SIGTERM or SIGINT cancels its context (releasing the Lease with
// --release-on-cancel) and it exits 0. After losing the Lease it contends again.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

type options struct {
	kubeconfig      string
	namespace       string
	lease           string
	identity        string
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	releaseOnCancel bool
	contentType     string
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("clientgo-elector", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the Lease")
	fs.StringVar(&o.lease, "lease", "", "name of the Lease (required)")
	fs.StringVar(&o.identity, "identity", "", "holder identity (required)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "LeaseDuration")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "RenewDeadline")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "RetryPeriod")
	fs.BoolVar(&o.releaseOnCancel, "release-on-cancel", false, "ReleaseOnCancel")
	fs.StringVar(&o.contentType, "content-type", "application/json",
		"wire format of requests (client-go's own default for Leases is "+
			"application/vnd.kubernetes.protobuf, which k8slease's embedded server does not speak)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.lease == "" {
		return o, fmt.Errorf("--lease is required")
	}
	if o.identity == "" {
		return o, fmt.Errorf("--identity is required")
	}
	if o.kubeconfig == "" {
		return o, fmt.Errorf("--kubeconfig is required (or KUBECONFIG)")
	}
	return o, nil
}

func newElector(o options, client kubernetes.Interface, out *reporter, t *terms) (*leaderelection.LeaderElector, error) {
	lock := &rl.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: o.lease, Namespace: o.namespace},
		Client:     client.CoordinationV1(),
		LockConfig: rl.ResourceLockConfig{Identity: o.identity},
	}
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            releaseOrderedLock{Interface: lock, terms: t},
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: o.releaseOnCancel,
		Name:            o.lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				t.begin(func() { out.emit("stopped_leading", "") })
				out.emit("started_leading", o.identity)
				<-ctx.Done()
				t.end()
			},
			OnStoppedLeading: t.end,
			OnNewLeader:      func(leader string) { out.emit("new_leader", leader) },
		},
	})
}

func run(o options) error {
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
	}
	config.ContentType = o.contentType
	if err := plainHTTPToken(config, o.kubeconfig); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	out := newReporter(os.Stdout, o.identity)
	t := &terms{}
	for ctx.Err() == nil {
		elector, err := newElector(o, client, out, t)
		if err != nil {
			return err
		}
		elector.Run(ctx) // returns when leadership is lost or ctx is cancelled
	}
	return nil
}

// plainHTTPToken gives config the kubeconfig user's bearer token when the server is plain http
// (the embedded API server): clientcmd reads a user's credentials only for TLS servers, and the
// embedded server answers 401 without the token it wrote into its kubeconfig.
func plainHTTPToken(config *rest.Config, kubeconfig string) error {
	if config.BearerToken != "" || rest.IsConfigTransportTLS(*config) {
		return nil
	}
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	if context, ok := raw.Contexts[raw.CurrentContext]; ok {
		if user, ok := raw.AuthInfos[context.AuthInfo]; ok {
			config.BearerToken = user.Token
		}
	}
	return nil
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientgo-elector:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "clientgo-elector:", err)
		os.Exit(1)
	}
}
