// SPDX-License-Identifier: Apache-2.0

// Command interop-peer is the Go (grpc-go) interop peer: it serves or calls the Interop service of
// tests/interop/interop.proto, with the same command line and JSON output as the Python peer
// (tests/interop/peer.py, which documents them) and the C peer (rpc-peer):
//
//	interop-peer serve --socket PATH
//	interop-peer call  --socket PATH --method Echo|Fail|Sleep|Stats [--path P] [--text S]
//	                   [--payload-size N] [--reply-size N] [--code N] [--message S] [--ms N]
//	                   [--timeout-ms N]
//	interop-peer count --socket PATH [--count N] [--interval-ms N] [--streams K] [--cancel-after M]
//	interop-peer many  --socket PATH --connections N
//	interop-peer bench --socket PATH [--calls N] [--warmup W] [--connections C] [--payload-size B]
//	                   [--time-limit-s S]
//	interop-peer hold  --socket PATH --connections N [--time-limit-s S]
//
// bench and hold are for bench/rpc (see peer.py for what they print).
//
// It dials unix sockets the way the kubelet does: a context dialer and the authority "localhost".
// Built in GOPATH mode by tests/interop/build-go-peer.sh against Debian's grpc-go.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	_ "gpuplane/grpccodec" // the "proto" codec for Debian's grpc-go (see there)
	pb "gpuplane/interoppb"
)

const service = "/gpuplane.interop.Interop/"

// The canonical gRPC names (grpc-go's codes.Code.String() spells them in Go style).
var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED"}

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: newEncoder()}

func newEncoder() *json.Encoder {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc
}

// emit prints one JSON line, whole, from any goroutine.
func emit(v interface{}) {
	out.Lock()
	defer out.Unlock()
	if err := out.enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}

func statusFields(err error) map[string]interface{} {
	st := status.Convert(err)
	name := "UNKNOWN"
	if int(st.Code()) < len(codeNames) {
		name = codeNames[st.Code()]
	}
	return map[string]interface{}{"code": int(st.Code()), "name": name, "message": st.Message()}
}

// ---- server ----

type server struct {
	pb.UnimplementedInteropServer
	stopping chan struct{}
	cancels  uint64
	calls    uint64
}

func (s *server) Echo(ctx context.Context, req *pb.EchoRequest) (*pb.EchoReply, error) {
	atomic.AddUint64(&s.calls, 1)
	payload := req.Payload
	if req.ReplySize > 0 {
		payload = make([]byte, req.ReplySize)
	}
	return &pb.EchoReply{Text: req.Text, Payload: payload}, nil
}

func (s *server) Count(req *pb.CountRequest, stream pb.Interop_CountServer) error {
	atomic.AddUint64(&s.calls, 1)
	interval := time.Duration(req.IntervalMs) * time.Millisecond
	for n := uint32(1); req.Count == 0 || n <= req.Count; n++ {
		if n > 1 {
			select {
			case <-time.After(interval):
			case <-s.stopping:
				return nil
			case <-stream.Context().Done():
				atomic.AddUint64(&s.cancels, 1)
				return stream.Context().Err()
			}
		}
		if err := stream.Send(&pb.CountReply{N: n}); err != nil {
			atomic.AddUint64(&s.cancels, 1)
			return err
		}
	}
	return nil
}

func (s *server) Fail(ctx context.Context, req *pb.FailRequest) (*pb.Empty, error) {
	atomic.AddUint64(&s.calls, 1)
	return nil, status.Error(codes.Code(req.Code), req.Message)
}

func (s *server) Sleep(ctx context.Context, req *pb.SleepRequest) (*pb.Empty, error) {
	atomic.AddUint64(&s.calls, 1)
	select {
	case <-time.After(time.Duration(req.Ms) * time.Millisecond):
		return &pb.Empty{}, nil
	case <-ctx.Done():
		atomic.AddUint64(&s.cancels, 1)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (s *server) Stats(ctx context.Context, req *pb.Empty) (*pb.StatsReply, error) {
	atomic.AddUint64(&s.calls, 1)
	return &pb.StatsReply{Cancels: atomic.LoadUint64(&s.cancels), Calls: atomic.LoadUint64(&s.calls)}, nil
}

func serve(socket string) int {
	_ = os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	srv := grpc.NewServer()
	impl := &server{stopping: make(chan struct{})}
	pb.RegisterInteropServer(srv, impl)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		close(impl.stopping)
		srv.GracefulStop()
	}()
	fmt.Println("ready")
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// ---- client ----

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

type callArgs struct {
	method, path, text, message string
	payloadSize, replySize, ms  uint
	code                        int
	timeoutMs                   uint
}

func call(socket string, a callArgs) int {
	ctx := context.Background()
	if a.timeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(a.timeoutMs)*time.Millisecond)
		defer cancel()
	}
	conn, err := dial(context.Background(), socket, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer conn.Close()
	path := a.path
	if path == "" {
		path = service + a.method
	}
	var req, reply interface{}
	var result func() map[string]interface{}
	switch a.method {
	case "Echo":
		r := &pb.EchoReply{}
		req = &pb.EchoRequest{Text: a.text, Payload: []byte(strings.Repeat("p", int(a.payloadSize))),
			ReplySize: uint32(a.replySize)}
		reply = r
		result = func() map[string]interface{} {
			return map[string]interface{}{"text": r.Text, "payload_size": len(r.Payload)}
		}
	case "Fail":
		req, reply = &pb.FailRequest{Code: int32(a.code), Message: a.message}, &pb.Empty{}
		result = func() map[string]interface{} { return map[string]interface{}{} }
	case "Sleep":
		req, reply = &pb.SleepRequest{Ms: uint32(a.ms)}, &pb.Empty{}
		result = func() map[string]interface{} { return map[string]interface{}{} }
	case "Stats":
		r := &pb.StatsReply{}
		req, reply = &pb.Empty{}, r
		result = func() map[string]interface{} {
			return map[string]interface{}{"cancels": r.Cancels, "calls": r.Calls,
				"max_connections": r.MaxConnections}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown method", a.method)
		return 2
	}
	err = conn.Invoke(ctx, path, req, reply)
	fields := statusFields(err)
	fields["reply"] = nil
	if err == nil {
		fields["reply"] = result()
	}
	emit(fields)
	return 0
}

func oneStream(client pb.InteropClient, index int, count, intervalMs, cancelAfter uint) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	received := 0
	stream, err := client.Count(ctx, &pb.CountRequest{Count: uint32(count), IntervalMs: uint32(intervalMs)})
	for err == nil {
		var r *pb.CountReply
		if r, err = stream.Recv(); err != nil {
			break
		}
		received++
		emit(map[string]interface{}{"stream": index, "n": r.N})
		if cancelAfter > 0 && uint(received) >= cancelAfter {
			cancel()
		}
	}
	if err == io.EOF {
		err = nil
	}
	fields := statusFields(err)
	fields["stream"], fields["end"], fields["received"] = index, true, received
	emit(fields)
}

func count(socket string, count, intervalMs, streams, cancelAfter uint) int {
	conn, err := dial(context.Background(), socket, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer conn.Close()
	client := pb.NewInteropClient(conn)
	var wg sync.WaitGroup
	for i := 0; i < int(streams); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			oneStream(client, i, count, intervalMs, cancelAfter)
		}(i)
	}
	wg.Wait()
	return 0
}

func many(socket string, n uint) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conns := make([]*grpc.ClientConn, n)
	codesSeen := map[string]int{}
	var mu sync.Mutex
	note := func(name string) {
		mu.Lock()
		codesSeen[name]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range conns { // connect all first, concurrently
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn, err := dial(ctx, socket, true)
			if err != nil {
				note("UNAVAILABLE")
				return
			}
			conns[i] = conn
		}(i)
	}
	wg.Wait()
	for i, conn := range conns {
		if conn == nil {
			continue
		}
		wg.Add(1)
		go func(i int, conn *grpc.ClientConn) {
			defer wg.Done()
			text := fmt.Sprint(i)
			r, err := pb.NewInteropClient(conn).Echo(ctx, &pb.EchoRequest{Text: text})
			switch {
			case err != nil:
				note(statusFields(err)["name"].(string))
			case r.Text != text:
				note("WRONG_REPLY")
			default:
				note("OK")
			}
		}(i, conn)
	}
	wg.Wait()
	for _, conn := range conns {
		if conn != nil {
			conn.Close()
		}
	}
	emit(map[string]interface{}{"ok": codesSeen["OK"], "codes": codesSeen})
	return 0
}

// dialAll opens n connections (one ClientConn, hence one transport, each), blocking until each is
// up.
func dialAll(ctx context.Context, socket string, n uint) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, n)
	for i := uint(0); i < n; i++ {
		conn, err := dial(ctx, socket, true)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, conn)
	}
	return conns, nil
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

// bench: a closed loop per connection. Each of C connections makes W warm-up Echo calls, then all
// of them make N sequential calls at once, each timed on the monotonic clock (time.Since); prints
// one JSON line with the latency percentiles over all calls and the calls per second of the timed
// phase. The time limit ends the run early (the result says how many calls were made).
func bench(socket string, calls, warmup, nconns, payloadSize, limitS uint) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(limitS)*time.Second)
	defer cancel()
	conns, err := dialAll(ctx, socket, nconns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	req := &pb.EchoRequest{Payload: bytes.Repeat([]byte("p"), int(payloadSize))}
	lat := make([][]time.Duration, len(conns))
	errs := make([]error, len(conns))
	run := func(n uint, record bool) {
		var wg sync.WaitGroup
		for i, conn := range conns {
			wg.Add(1)
			go func(i int, client pb.InteropClient) {
				defer wg.Done()
				l := make([]time.Duration, 0, n)
				for j := uint(0); j < n && ctx.Err() == nil; j++ {
					t := time.Now()
					r, err := client.Echo(ctx, req)
					d := time.Since(t)
					if err == nil && len(r.Payload) != len(req.Payload) {
						err = fmt.Errorf("reply payload %d bytes, want %d", len(r.Payload), len(req.Payload))
					}
					if err != nil {
						errs[i] = err
						return
					}
					l = append(l, d)
				}
				if record {
					lat[i] = l
				}
			}(i, pb.NewInteropClient(conn))
		}
		wg.Wait()
	}
	run(warmup, false)
	start := time.Now()
	run(calls, true)
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	nerr := 0
	for _, e := range errs {
		if e != nil {
			nerr++
			fmt.Fprintln(os.Stderr, "call:", e)
		}
	}
	mean := 0.0
	if len(all) > 0 {
		mean = float64(sum.Nanoseconds()) / 1e3 / float64(len(all))
	}
	emit(map[string]interface{}{
		"client":       "go",
		"connections":  len(conns),
		"calls":        len(all),
		"errors":       nerr,
		"payload_size": payloadSize,
		"seconds":      elapsed.Seconds(),
		"calls_per_s":  float64(len(all)) / elapsed.Seconds(),
		"p50_us":       percentileUs(all, 0.50),
		"p99_us":       percentileUs(all, 0.99),
		"p999_us":      percentileUs(all, 0.999),
		"max_us":       percentileUs(all, 1),
		"mean_us":      mean,
	})
	return 0
}

// hold: opens n connections, makes one Echo on each, prints {"ok": n}, then keeps them open until
// stdin reaches end of file or the time limit passes.
func hold(socket string, n, limitS uint) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(limitS)*time.Second)
	defer cancel()
	conns, err := dialAll(ctx, socket, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ok := 0
	for _, conn := range conns {
		if _, err := pb.NewInteropClient(conn).Echo(ctx, &pb.EchoRequest{Text: "hold"}); err == nil {
			ok++
		}
	}
	emit(map[string]interface{}{"ok": ok})
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: interop-peer serve|call|count|many|bench|hold --socket PATH [options]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	socket := fs.String("socket", "", "unix socket path")
	var a callArgs
	fs.StringVar(&a.method, "method", "Echo", "Echo, Fail, Sleep or Stats")
	fs.StringVar(&a.path, "path", "", "method path to call instead of the method's own")
	fs.StringVar(&a.text, "text", "", "Echo text")
	fs.UintVar(&a.payloadSize, "payload-size", 0, "Echo request payload bytes")
	fs.UintVar(&a.replySize, "reply-size", 0, "Echo reply payload bytes")
	fs.IntVar(&a.code, "code", 2, "Fail code")
	fs.StringVar(&a.message, "message", "", "Fail message")
	fs.UintVar(&a.ms, "ms", 0, "Sleep milliseconds")
	fs.UintVar(&a.timeoutMs, "timeout-ms", 0, "call deadline (0: none)")
	n := fs.Uint("count", 3, "Count messages per stream (0: endless)")
	interval := fs.Uint("interval-ms", 10, "Count interval")
	streams := fs.Uint("streams", 1, "concurrent Count streams")
	cancelAfter := fs.Uint("cancel-after", 0, "cancel each stream after this many messages")
	conns := fs.Uint("connections", 100, "connections for many, bench (default 1) and hold")
	calls := fs.Uint("calls", 10000, "bench: timed calls per connection")
	warmup := fs.Uint("warmup", 1000, "bench: untimed calls per connection first")
	limitS := fs.Uint("time-limit-s", 120, "bench, hold: give up after this many seconds")
	if mode == "bench" {
		*conns = 1
	}
	_ = fs.Parse(os.Args[2:])
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "--socket is required")
		os.Exit(2)
	}
	switch mode {
	case "serve":
		os.Exit(serve(*socket))
	case "call":
		os.Exit(call(*socket, a))
	case "count":
		os.Exit(count(*socket, *n, *interval, *streams, *cancelAfter))
	case "many":
		os.Exit(many(*socket, *conns))
	case "bench":
		os.Exit(bench(*socket, *calls, *warmup, *conns, a.payloadSize, *limitS))
	case "hold":
		os.Exit(hold(*socket, *conns, *limitS))
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	os.Exit(2)
}
