// SPDX-License-Identifier: Apache-2.0

// Package grpccodec is imported for its side effect by the Go test peers (interop-peer,
// dra-kubelet), which tests/interop/build-go-peer.sh builds in GOPATH mode with this directory
// copied to gpuplane/grpccodec.
//
// Debian 12 packages grpc-go 1.33, whose default "proto" codec marshals with
// github.com/golang/protobuf 1.3 (the old table-driven API), while protoc-gen-go 1.28 generates
// messages for google.golang.org/protobuf (API v2): the old codec panics on them ("protobuf tag
// not enough fields in EchoReply.state"). Newer grpc-go releases marshal through API v2; this file
// does the same by registering a replacement codec under the name "proto", which both the client
// and the server side of grpc-go look up. The wire format is unchanged.
package grpccodec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

type codecV2 struct{}

func (codecV2) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: %T is not a proto.Message", v)
	}
	return proto.Marshal(m)
}

func (codecV2) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: %T is not a proto.Message", v)
	}
	return proto.Unmarshal(data, m)
}

func (codecV2) Name() string { return "proto" }

func init() {
	encoding.RegisterCodec(codecV2{})
}
