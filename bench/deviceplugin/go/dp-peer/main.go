// SPDX-License-Identifier: Apache-2.0

// Command dp-peer is the grpc-go device plugin bench/deviceplugin measures gpuplane against: the
// least a Go device plugin does to answer the kubelet, with nothing of a real plugin's bookkeeping,
// so its latency is grpc-go's own floor for these calls.
//
//	dp-peer --socket PATH --devices ID,ID,... [--resource NAME]
//
// It serves v1beta1.DevicePlugin (proto/deviceplugin/v1beta1/api.proto) on the unix socket PATH,
// prints one line "ready" on stdout once it listens, and stops on SIGTERM or SIGINT (removing the
// socket). It does not register with a kubelet: a client dials PATH directly.
//
//   - GetDevicePluginOptions: {pre_start_required: false, get_preferred_allocation_available:
//     true}, as gpuplane and NVIDIA's plugin answer;
//   - Allocate: every id must be one of --devices (else INVALID_ARGUMENT, unknown device); each
//     container gets what NVIDIA's plugin answers with the default envvar device list strategy and
//     no CDI, MPS or device specs: envs {NVIDIA_VISIBLE_DEVICES: the ids joined by ","};
//   - GetPreferredAllocation: the must-include ids, then the available ones in request order, up
//     to the size (no topology);
//   - ListAndWatch: every device Healthy once, then the stream stays open until the client goes;
//   - PreStartContainer: an empty answer.
//
// Built in GOPATH mode by bench/deviceplugin/build-go-client.sh against Debian's grpc-go
// (gpuplane/grpccodec: see there).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gpuplane/deviceplugin/v1beta1"
	_ "gpuplane/grpccodec" // the "proto" codec for Debian's grpc-go
)

type plugin struct {
	pb.UnimplementedDevicePluginServer
	resource string
	devices  []string
	known    map[string]bool
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pb.Empty) (*pb.DevicePluginOptions, error) {
	return &pb.DevicePluginOptions{PreStartRequired: false, GetPreferredAllocationAvailable: true}, nil
}

func (p *plugin) Allocate(_ context.Context, req *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	resp := &pb.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !p.known[id] {
				return nil, status.Errorf(codes.InvalidArgument,
					"invalid allocation request for %q: unknown device: %s", p.resource, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(_ context.Context, req *pb.PreferredAllocationRequest) (*pb.PreferredAllocationResponse, error) {
	resp := &pb.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		chosen := []string{}
		seen := map[string]bool{}
		for _, list := range [][]string{c.MustIncludeDeviceIDs, c.AvailableDeviceIDs} {
			for _, id := range list {
				if len(chosen) < int(c.AllocationSize) && !seen[id] {
					seen[id] = true
					chosen = append(chosen, id)
				}
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses,
			&pb.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return resp, nil
}

func (p *plugin) ListAndWatch(_ *pb.Empty, stream pb.DevicePlugin_ListAndWatchServer) error {
	msg := &pb.ListAndWatchResponse{}
	for _, id := range p.devices {
		msg.Devices = append(msg.Devices, &pb.Device{ID: id, Health: "Healthy"})
	}
	if err := stream.Send(msg); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) PreStartContainer(context.Context, *pb.PreStartContainerRequest) (*pb.PreStartContainerResponse, error) {
	return &pb.PreStartContainerResponse{}, nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "dp-peer: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	socket := flag.String("socket", "", "the unix socket to serve on")
	devices := flag.String("devices", "", "the device ids, comma-separated")
	resource := flag.String("resource", "nvidia.com/gpu", "the resource name (in error messages)")
	flag.Parse()
	if *socket == "" || *devices == "" {
		fail("usage: dp-peer --socket PATH --devices ID,ID,... [--resource NAME]")
	}
	p := &plugin{resource: *resource, devices: strings.Split(*devices, ","), known: map[string]bool{}}
	for _, id := range p.devices {
		p.known[id] = true
	}

	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		fail("remove %s: %v", *socket, err)
	}
	lis, err := net.Listen("unix", *socket)
	if err != nil {
		fail("listen %s: %v", *socket, err)
	}
	srv := grpc.NewServer()
	pb.RegisterDevicePluginServer(srv, p)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		// Stop, not GracefulStop: an open ListAndWatch stream would keep GracefulStop waiting.
		srv.Stop()
	}()

	fmt.Println("ready")
	if err := srv.Serve(lis); err != nil {
		fail("serve: %v", err)
	}
	os.Remove(*socket)
}
