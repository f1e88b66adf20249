// SPDX-License-Identifier: Apache-2.0

// Command dp-bench is the grpc-go client of bench/deviceplugin: it dials a device plugin's socket
// (DevicePlugin v1beta1, proto/deviceplugin/v1beta1/api.proto) the way the kubelet does and
//
//	dp-bench allocate --socket PATH --ids ID[,ID...] [--calls N] [--warmup W] [--time-limit-s S]
//	    calls Allocate N times sequentially (one container request with the ids) after W untimed
//	    calls; prints one JSON line {calls, errors, first_error, p50_us, p90_us, p99_us, p999_us,
//	    max_us, mean_us, calls_per_s}
//	dp-bench prefer --socket PATH --available ID,... --size K [--must ID,...] [--calls N]
//	    [--warmup W] [--time-limit-s S]
//	    the same for GetPreferredAllocation (one container request), plus "answer": the ids of the
//	    last reply
//	dp-bench options --socket PATH [--calls N] [--warmup W] [--time-limit-s S]
//	    the same for GetDevicePluginOptions: the plugin's unary round trip with no work in it (the
//	    floor under the other two)
//	dp-bench watch --socket PATH [--time-limit-s S]
//	    opens ListAndWatch and prints a JSON line per snapshot as soon as it arrives:
//	    {t_ns (wall clock, Unix ns, taken right after Recv), n, devices, healthy, unhealthy: [ids]};
//	    exits when stdin is closed, the stream ends, or the time limit passes
//
// Latencies are measured on the monotonic clock around each call. Built in GOPATH mode by
// bench/deviceplugin/build-go-client.sh against Debian's grpc-go (gpuplane/grpccodec: see there).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"

	pb "gpuplane/deviceplugin/v1beta1"
	_ "gpuplane/grpccodec" // the "proto" codec for Debian's grpc-go
)

func emit(v interface{}) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "dp-bench: "+format+"\n", args...)
	os.Exit(1)
}

func dial(ctx context.Context, socket string) (*grpc.ClientConn, error) {
	return grpc.DialContext(ctx, socket,
		grpc.WithInsecure(),
		grpc.WithBlock(),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

func ids(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// percentileUs is the nearest-rank percentile of sorted durations, in microseconds.
func percentileUs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// loop runs call warmup times untimed, then calls times timed (stopping at the deadline).
func loop(call func(context.Context) error, calls, warmup int, deadline time.Time) map[string]interface{} {
	ctx := context.Background()
	errors := 0
	firstError := ""
	note := func(err error) {
		if err != nil {
			if errors == 0 {
				firstError = err.Error()
			}
			errors++
		}
	}
	for i := 0; i < warmup && time.Now().Before(deadline); i++ {
		note(call(ctx))
	}
	lat := make([]time.Duration, 0, calls)
	start := time.Now()
	for i := 0; i < calls && time.Now().Before(deadline); i++ {
		t0 := time.Now()
		err := call(ctx)
		lat = append(lat, time.Since(t0))
		note(err)
	}
	wall := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	mean := 0.0
	if len(lat) > 0 {
		mean = float64(sum.Nanoseconds()) / 1e3 / float64(len(lat))
	}
	return map[string]interface{}{
		"calls": len(lat), "errors": errors, "first_error": firstError,
		"p50_us": percentileUs(lat, 0.50), "p90_us": percentileUs(lat, 0.90),
		"p99_us": percentileUs(lat, 0.99), "p999_us": percentileUs(lat, 0.999),
		"max_us": percentileUs(lat, 1), "mean_us": mean,
		"calls_per_s": float64(len(lat)) / wall.Seconds(),
	}
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: dp-bench allocate|prefer|options|watch --socket PATH ...")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	socket := fs.String("socket", "", "the plugin's socket")
	idList := fs.String("ids", "", "allocate: device ids")
	available := fs.String("available", "", "prefer: available ids")
	must := fs.String("must", "", "prefer: must-include ids")
	size := fs.Int("size", 1, "prefer: allocation size")
	calls := fs.Int("calls", 10000, "timed calls")
	warmup := fs.Int("warmup", 1000, "untimed calls first")
	limit := fs.Int("time-limit-s", 120, "give up after this long")
	fs.Parse(os.Args[2:])
	if *socket == "" {
		fail("--socket is required")
	}
	deadline := time.Now().Add(time.Duration(*limit) * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := dial(dctx, *socket)
	dcancel()
	if err != nil {
		fail("dial %s: %v", *socket, err)
	}
	defer conn.Close()
	client := pb.NewDevicePluginClient(conn)

	switch mode {
	case "allocate":
		req := &pb.AllocateRequest{ContainerRequests: []*pb.ContainerAllocateRequest{
			{DevicesIds: ids(*idList)}}}
		res := loop(func(c context.Context) error {
			_, err := client.Allocate(c, req)
			return err
		}, *calls, *warmup, deadline)
		emit(res)
	case "prefer":
		req := &pb.PreferredAllocationRequest{ContainerRequests: []*pb.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: ids(*available), MustIncludeDeviceIDs: ids(*must),
				AllocationSize: int32(*size)}}}
		var answer []string
		res := loop(func(c context.Context) error {
			r, err := client.GetPreferredAllocation(c, req)
			if err == nil && len(r.ContainerResponses) == 1 {
				answer = r.ContainerResponses[0].DeviceIDs
			}
			return err
		}, *calls, *warmup, deadline)
		res["answer"] = answer
		emit(res)
	case "options":
		res := loop(func(c context.Context) error {
			_, err := client.GetDevicePluginOptions(c, &pb.Empty{})
			return err
		}, *calls, *warmup, deadline)
		emit(res)
	case "watch":
		go func() { // stdin closed: stop
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
		stream, err := client.ListAndWatch(ctx, &pb.Empty{})
		if err != nil {
			fail("ListAndWatch: %v", err)
		}
		for n := 0; ; n++ {
			msg, err := stream.Recv()
			t := time.Now().UnixNano()
			if err != nil {
				if err == io.EOF || ctx.Err() != nil {
					return
				}
				fail("ListAndWatch: %v", err)
			}
			unhealthy := []string{}
			for _, d := range msg.Devices {
				if d.Health != "Healthy" {
					unhealthy = append(unhealthy, d.ID)
				}
			}
			emit(map[string]interface{}{"t_ns": t, "n": n, "devices": len(msg.Devices),
				"healthy": len(msg.Devices) - len(unhealthy), "unhealthy": unhealthy})
		}
	default:
		fail("unknown mode %q", mode)
	}
}
