// SPDX-License-Identifier: Apache-2.0

// Command dra-kubelet is the kubelet's side of the DRA plugin APIs on grpc-go, the library the
// real kubelet uses, for tests of `gpuplane dra-driver` (tests/integration/test_dra_driver_go.py).
// The Python emulator (tools/kubelet-emulator/dra_emu.py) covers the behaviour; this checks the
// wire against grpc-go. Each command makes its calls, prints one JSON line and exits: 0 when the
// calls succeeded, 1 when one failed or the kubelet would refuse the plugin, 2 on usage errors.
//
//	dra-kubelet register --socket REG_SOCK [--services v1.DRAPlugin,v1beta1.DRAPlugin]
//	                     [--timeout-ms 1000]
//	dra-kubelet prepare|unprepare --endpoint DRA_SOCK --version v1|v1beta1
//	                     --claim NAMESPACE/NAME/UID [--claim ...] [--timeout-ms 45000]
//
// register does what the kubelet's plugin watcher and DRA handler do with a socket that appears in
// plugins_registry: GetInfo (1 s deadline), validate the answer (type DRAPlugin, a name, an
// absolute endpoint, a service the kubelet speaks), pick the first of the kubelet's services that
// the plugin lists, NotifyRegistrationStatus. It prints
//
//	{"info": {"type", "name", "endpoint", "supported_versions"}, "endpoint": the DRA socket,
//	 "service": "v1.DRAPlugin", "version": "v1", "registered": true, "notified": true}
//
// or, refused, "registered": false and "error"; a failed call prints "error" and "status".
//
// prepare and unprepare make one NodePrepareResources or NodeUnprepareResources call (45 s
// deadline, as the kubelet) and print {"version", "claims": {UID: {"error", "devices": [{
// "request_names", "pool_name", "device_name", "cdi_device_ids", "share_id" (v1, when set)}]}}}
// ("devices" only for prepare), or {"status": {"code", "name", "message"}} when the call failed.
//
// Built in GOPATH mode by tests/interop/build-go-peer.sh (peer dra-kubelet) against Debian's
// grpc-go, from the project's own .proto files.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	_ "gpuplane/grpccodec" // the "proto" codec for Debian's grpc-go (see there)
	"gpuplane/kubeletpb/drav1"
	"gpuplane/kubeletpb/drav1beta1"
	"gpuplane/kubeletpb/registration"
)

const (
	pluginType     = "DRAPlugin"
	getInfoTimeout = time.Second      // the plugin watcher's
	notifyTimeout  = 10 * time.Second // ditto
	dialTimeout    = 10 * time.Second // the registration dial
	callTimeout    = 45 * time.Second // the DRA manager's per-call timeout
)

// The kubelet's services, most recent first: the first one the plugin lists is chosen.
var kubeletServices = []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}

// The canonical gRPC names (grpc-go's codes.Code.String() spells them in Go style).
var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED"}

type object = map[string]interface{}

func emit(v object) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}

func usage(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "dra-kubelet: "+format+"\n", args...)
	fmt.Fprintln(os.Stderr, "usage: dra-kubelet register --socket PATH [--services LIST] "+
		"[--timeout-ms N]\n       dra-kubelet prepare|unprepare --endpoint PATH "+
		"--version v1|v1beta1 --claim NS/NAME/UID... [--timeout-ms N]")
	os.Exit(2)
}

func statusFields(err error) object {
	st := status.Convert(err)
	name := "UNKNOWN"
	if int(st.Code()) < len(codeNames) {
		name = codeNames[st.Code()]
	}
	return object{"code": int(st.Code()), "name": name, "message": st.Message()}
}

// dial connects to a unix socket the way the kubelet does: a context dialer and the authority
// "localhost". block waits for the connection (the registration dial); otherwise the first call
// does.
func dial(ctx context.Context, socket string, block bool) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithInsecure(),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
	}
	if block {
		opts = append(opts, grpc.WithBlock())
	}
	return grpc.DialContext(ctx, socket, opts...)
}

// ---- register ----

func register(args []string) int {
	fs := flag.NewFlagSet("register", flag.ExitOnError)
	socket := fs.String("socket", "", "the plugin's registration socket")
	services := fs.String("services", strings.Join(kubeletServices, ","),
		"the DRA services this kubelet speaks, most recent first")
	timeoutMs := fs.Uint("timeout-ms", uint(getInfoTimeout/time.Millisecond), "GetInfo deadline")
	_ = fs.Parse(args)
	if *socket == "" || fs.NArg() != 0 {
		usage("register needs --socket and no other arguments")
	}
	ours := strings.Split(*services, ",")

	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	conn, err := dial(ctx, *socket, true)
	if err != nil {
		emit(object{"error": fmt.Sprintf("dial failed at socket %s: %v", *socket, err)})
		return 1
	}
	defer conn.Close()
	client := registration.NewRegistrationClient(conn)

	infoCtx, infoCancel := context.WithTimeout(context.Background(),
		time.Duration(*timeoutMs)*time.Millisecond)
	defer infoCancel()
	info, err := client.GetInfo(infoCtx, &registration.InfoRequest{})
	if err != nil {
		emit(object{"error": "GetInfo: " + err.Error(), "status": statusFields(err)})
		return 1
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = *socket // the plugin serves its API on the registration socket
	}
	result := object{
		"info": object{"type": info.Type, "name": info.Name, "endpoint": info.Endpoint,
			"supported_versions": nonNil(info.SupportedVersions)},
		"endpoint": endpoint,
	}
	service, verr := validate(info, endpoint, ours)

	notifyCtx, notifyCancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer notifyCancel()
	note := &registration.RegistrationStatus{PluginRegistered: verr == nil}
	if verr != nil {
		note.Error = verr.Error()
		result["error"] = verr.Error()
	}
	_, nerr := client.NotifyRegistrationStatus(notifyCtx, note)
	result["registered"] = verr == nil
	result["notified"] = nerr == nil
	if nerr != nil {
		result["notify_status"] = statusFields(nerr)
	}
	if verr != nil || nerr != nil {
		emit(result)
		return 1
	}
	result["service"] = service
	result["version"] = strings.TrimSuffix(service, "."+pluginType)
	emit(result)
	return 0
}

// validate checks GetInfo's answer as the plugin watcher (type) and the DRA handler (the rest) do,
// a little stricter on name and endpoint, and returns the chosen service.
func validate(info *registration.PluginInfo, endpoint string, ours []string) (string, error) {
	if info.Type != pluginType {
		return "", fmt.Errorf("no handler registered for plugin type: %s", info.Type)
	}
	if info.Name == "" {
		return "", errors.New("DRA driver name is empty")
	}
	if !filepath.IsAbs(endpoint) {
		return "", fmt.Errorf("endpoint %q is not an absolute path", endpoint)
	}
	if len(info.SupportedVersions) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range ours {
		for _, theirs := range info.SupportedVersions {
			if s == theirs {
				return s, nil
			}
		}
	}
	return "", fmt.Errorf("none of the services supported by the plugin (%s) are supported by "+
		"the kubelet (%s)", strings.Join(info.SupportedVersions, ", "), strings.Join(ours, ", "))
}

// ---- prepare and unprepare ----

type claimRef struct{ namespace, name, uid string }

type claimFlags []claimRef

func (c *claimFlags) String() string { return fmt.Sprint(len(*c), " claims") }

// Set takes NAMESPACE/NAME/UID; any part may be empty, to send malformed requests on purpose.
func (c *claimFlags) Set(s string) error {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return fmt.Errorf("claim %q is not NAMESPACE/NAME/UID", s)
	}
	*c = append(*c, claimRef{parts[0], parts[1], parts[2]})
	return nil
}

// wireDevice is what the Device messages of v1 and v1beta1 have in common.
type wireDevice interface {
	GetRequestNames() []string
	GetPoolName() string
	GetDeviceName() string
	GetCdiDeviceIds() []string
}

func deviceFields(d wireDevice, shareID *string) object {
	o := object{"request_names": nonNil(d.GetRequestNames()), "pool_name": d.GetPoolName(),
		"device_name": d.GetDeviceName(), "cdi_device_ids": nonNil(d.GetCdiDeviceIds())}
	if shareID != nil {
		o["share_id"] = *shareID
	}
	return o
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type call func(ctx context.Context, conn *grpc.ClientConn, claims []claimRef) (object, error)

func prepareV1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef) (object, error) {
	req := &drav1.NodePrepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, &drav1.Claim{Namespace: c.namespace, Name: c.name, Uid: c.uid})
	}
	resp, err := drav1.NewDRAPluginClient(conn).NodePrepareResources(ctx, req)
	if err != nil {
		return nil, err
	}
	out := object{}
	for uid, a := range resp.Claims {
		devices := []object{}
		for _, d := range a.Devices {
			devices = append(devices, deviceFields(d, d.ShareId))
		}
		out[uid] = object{"error": a.Error, "devices": devices}
	}
	return out, nil
}

func prepareV1beta1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef) (object, error) {
	req := &drav1beta1.NodePrepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims,
			&drav1beta1.Claim{Namespace: c.namespace, Name: c.name, Uid: c.uid})
	}
	resp, err := drav1beta1.NewDRAPluginClient(conn).NodePrepareResources(ctx, req)
	if err != nil {
		return nil, err
	}
	out := object{}
	for uid, a := range resp.Claims {
		devices := []object{}
		for _, d := range a.Devices {
			devices = append(devices, deviceFields(d, nil))
		}
		out[uid] = object{"error": a.Error, "devices": devices}
	}
	return out, nil
}

func unprepareV1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef) (object, error) {
	req := &drav1.NodeUnprepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, &drav1.Claim{Namespace: c.namespace, Name: c.name, Uid: c.uid})
	}
	resp, err := drav1.NewDRAPluginClient(conn).NodeUnprepareResources(ctx, req)
	if err != nil {
		return nil, err
	}
	out := object{}
	for uid, a := range resp.Claims {
		out[uid] = object{"error": a.Error}
	}
	return out, nil
}

func unprepareV1beta1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef) (object, error) {
	req := &drav1beta1.NodeUnprepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims,
			&drav1beta1.Claim{Namespace: c.namespace, Name: c.name, Uid: c.uid})
	}
	resp, err := drav1beta1.NewDRAPluginClient(conn).NodeUnprepareResources(ctx, req)
	if err != nil {
		return nil, err
	}
	out := object{}
	for uid, a := range resp.Claims {
		out[uid] = object{"error": a.Error}
	}
	return out, nil
}

var calls = map[string]map[string]call{
	"prepare":   {"v1": prepareV1, "v1beta1": prepareV1beta1},
	"unprepare": {"v1": unprepareV1, "v1beta1": unprepareV1beta1},
}

func dra(op string, args []string) int {
	fs := flag.NewFlagSet(op, flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "the driver's DRA socket")
	version := fs.String("version", "v1", "the API version: v1 or v1beta1")
	timeoutMs := fs.Uint("timeout-ms", uint(callTimeout/time.Millisecond), "call deadline")
	var claims claimFlags
	fs.Var(&claims, "claim", "NAMESPACE/NAME/UID (repeatable)")
	_ = fs.Parse(args)
	fn, ok := calls[op][*version]
	if *endpoint == "" || !ok || fs.NArg() != 0 {
		usage("%s needs --endpoint, --version v1 or v1beta1, and no other arguments", op)
	}

	ctx, cancel := context.WithTimeout(context.Background(),
		time.Duration(*timeoutMs)*time.Millisecond)
	defer cancel()
	conn, err := dial(ctx, *endpoint, false)
	if err != nil {
		emit(object{"version": *version, "error": err.Error()})
		return 1
	}
	defer conn.Close()
	answers, err := fn(ctx, conn, claims)
	if err != nil {
		emit(object{"version": *version, "status": statusFields(err)})
		return 1
	}
	emit(object{"version": *version, "claims": answers})
	return 0
}

func main() {
	if len(os.Args) < 2 {
		usage("no command")
	}
	switch cmd := os.Args[1]; cmd {
	case "register":
		os.Exit(register(os.Args[2:]))
	case "prepare", "unprepare":
		os.Exit(dra(cmd, os.Args[2:]))
	default:
		usage("unknown command %q", cmd)
	}
}
