package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// Message limits. Each RPC accepts what it may legitimately carry and no
// more; the server-wide gRPC limits are derived from the largest body a
// policy may allow (engine.MaxBodyLimit), so no valid policy can allow a
// body the server would refuse to receive or send.
const (
	// MaxClassifyMessage bounds a ClassifyResponse request: two header
	// lists of 64 KiB, a 64 KiB body, an 8 KiB URL and small fields, with
	// room for their framing.
	MaxClassifyMessage = 256 << 10
	// ExecuteOverhead is what an Execute request may carry beyond its body:
	// headers (64 KiB), the URL (8 KiB), names and overrides, and framing.
	ExecuteOverhead = 256 << 10
	// MaxRecvMsgSize is the server-wide receive limit: the largest Execute
	// request any policy allows.
	MaxRecvMsgSize = engine.MaxBodyLimit + ExecuteOverhead
	// MaxErrorMessage bounds an attempt's error_message, in bytes (longer
	// ones are cut at a character boundary).
	MaxErrorMessage = 1 << 10
	// ResponseOverhead is what an Execute response may carry beyond its
	// body and headers: up to engine.MaxRetriesLimit+1 attempts of at most
	// 4 KiB each (an error message of MaxErrorMessage, names of at most a
	// few hundred bytes, numbers), the outcome, provider and framing.
	ResponseOverhead = 1 << 20
	// headerLineOverhead is what one header line costs on the wire of an
	// HttpHeader beyond its name and value: a tag and a length for the
	// entry, for the name and for the value (lengths below 2 MiB).
	headerLineOverhead = 12
	// MaxSendMsgSize is the server-wide send limit: the largest response
	// body any policy allows, plus the largest head the egress transport
	// lets through (egress.MaxResponseHeaderBytes of names and values in at
	// most egress.MaxResponseHeaderLines lines), plus ResponseOverhead. No
	// response built after an upstream call can exceed it, so no call
	// answers RESOURCE_EXHAUSTED after its upstream call was made.
	MaxSendMsgSize = engine.MaxBodyLimit + egress.MaxResponseHeaderBytes +
		egress.MaxResponseHeaderLines*headerLineOverhead + ResponseOverhead
)

// RequestLimiter is implemented by services that bound each request
// message by its RPC and caller (Service does). NewGRPCServer asks it,
// before decoding, whether a message of n bytes may be decoded for
// method (a full method name) under ctx, which carries the caller's
// identity: identity is checked before any message is decoded.
type RequestLimiter interface {
	// MaxRequestSize returns the largest request message accepted for
	// method from the caller of ctx, in bytes.
	MaxRequestSize(ctx context.Context, method string) int
}

// rawMessage is a request as received: the codec keeps its bytes instead of
// decoding them, so the handler can check the caller and the size first.
type rawMessage struct {
	buf mem.Buffer
}

// rawCodec is the server's codec: proto for every message but rawMessage,
// whose bytes it keeps as they arrived.
type rawCodec struct{ proto encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{proto: encoding.GetCodecV2("proto")} }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *encodedReply:
		data := m.data
		if data == nil {
			return nil, errors.New("marshal: an encoded reply is sent once")
		}
		m.data = nil // gRPC frees the buffers once written
		return data, nil
	case *rbv1.ExecuteResponse:
		return marshalExecuteResponse(m)
	case *rbv1.ExecuteStreamResponse:
		return marshalVT(m)
	case *rbv1.ClassifyResponseResponse:
		return marshalVT(m)
	}
	return c.proto.Marshal(v)
}

// marshalExecuteResponse encodes an Execute answer: in place when its body
// is large (marshalSpliced), with its generated marshaller otherwise.
func marshalExecuteResponse(m *rbv1.ExecuteResponse) (mem.BufferSlice, error) {
	if len(m.GetResponse().GetBody()) >= spliceBody {
		return marshalSpliced(m)
	}
	return marshalVT(m)
}

// vtMessage is a message with a generated marshaller (protoc-gen-go-vtproto,
// gen/retrybroker/v1/broker_vtproto.pb.go).
//
// The codec uses it for the answers the broker builds itself on its hot
// paths (Execute, ExecuteStream, ClassifyResponse) and proto.Marshal for
// the rest: the generated marshaller of google.protobuf.Timestamp and
// Duration drops unknown fields inside them, which only a message that
// carries a caller's own bytes back (a task's request) could hold.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// marshalVT encodes m with its generated marshaller, into a buffer from
// gRPC's pool when the message is large enough to be pooled (as gRPC's own
// proto codec does). The generated code writes each field straight from
// the struct, with no reflection: it is several times faster than
// proto.Marshal, and its frames are small, so a stream's head is encoded
// without growing the stack of the goroutine that sends it.
func marshalVT(m vtMessage) (mem.BufferSlice, error) {
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		return marshalSmall(m, size)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if err := marshalInto(m, (*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// smallEncoding is a BufferSlice of one unpooled buffer, made by one
// allocation: the slice's array and the buffer its element points to
// (boxing a SliceBuffer into the Buffer interface would allocate it
// apart, and the slice of one another time).
type smallEncoding struct {
	slice [1]mem.Buffer
	buf   mem.SliceBuffer
}

// marshalSmall encodes m, of size bytes (below gRPC's pooling threshold),
// into a buffer of its own: two allocations, the bytes and their
// smallEncoding.
func marshalSmall(m vtMessage, size int) (mem.BufferSlice, error) {
	b := make([]byte, size)
	if err := marshalInto(m, b); err != nil {
		return nil, err
	}
	e := &smallEncoding{buf: b}
	e.slice[0] = &e.buf
	return e.slice[:], nil
}

// marshalInto encodes m into buf, which is exactly m's size.
func marshalInto(m vtMessage, buf []byte) error {
	n, err := m.MarshalToSizedBufferVT(buf)
	if err == nil && n != len(buf) {
		err = fmt.Errorf("marshal: %d bytes written of %d", n, len(buf))
	}
	return err
}

// spliceBody is the smallest response body marshalSpliced sends in place.
const spliceBody = 64 << 10

// Field numbers of the response body and of the message that holds it.
var (
	responseField = (&rbv1.ExecuteResponse{}).ProtoReflect().Descriptor().Fields().ByName("response").Number()
	bodyField     = (&rbv1.HttpResponse{}).ProtoReflect().Descriptor().Fields().ByName("body").Number()
)

// marshalSpliced encodes an Execute response without copying its body: the
// message is the encoding of everything but the response, then the
// response's field with everything but the body, then the body's tag and
// length, then the body itself, sent from the engine's buffer (each field
// once; protobuf parsers accept fields in any order). So the body is held
// once, by the engine's buffer, until gRPC has written it.
func marshalSpliced(m *rbv1.ExecuteResponse) (mem.BufferSlice, error) {
	resp := m.Response
	body := resp.Body
	resp.Body, m.Response = nil, nil
	outer, err := m.MarshalVT()
	m.Response = resp
	var inner []byte
	if err == nil {
		inner, err = resp.MarshalVT()
	}
	resp.Body = body
	if err != nil {
		return nil, err
	}
	bodyHead := protowire.AppendVarint(protowire.AppendTag(nil, bodyField, protowire.BytesType), uint64(len(body)))
	head := make([]byte, 0, len(outer)+2*binary.MaxVarintLen64+len(inner)+len(bodyHead))
	head = append(head, outer...)
	head = protowire.AppendTag(head, responseField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(inner)+len(bodyHead)+len(body)))
	head = append(append(head, inner...), bodyHead...)
	return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(body)}, nil
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

// headerFields are, per request type, the field numbers of its repeated
// header lists, with the path to them: decoding a message of nothing but
// empty header entries costs tens of bytes of memory per wire byte, so the
// entries are counted on the wire, before decoding.
var (
	classifyHeaderFields = []headerField{{path: "headers", num: 5}, {path: "request_headers", num: 10}}
	executeHeaderFields  = []headerField{{path: "request.headers", parent: 1, num: 3}}
	// CreateTaskRequest.execute (1) is an ExecuteRequest.
	createTaskHeaderFields = []headerField{{path: "execute.request.headers", outer: 1, parent: 1, num: 3}}
)

type headerField struct {
	path   string
	outer  protowire.Number // 0: parent is a top-level field
	parent protowire.Number // 0: a top-level field
	num    protowire.Number
}

// decodeRequest checks raw against the RPC's limit and its header counts,
// then decodes it into m. Every failure is a precise status: an oversized
// message RESOURCE_EXHAUSTED, a malformed one (invalid encoding, invalid
// UTF-8 in a string) INVALID_ARGUMENT.
func decodeRequest(raw *rawMessage, limit int, fields []headerField, m proto.Message) error {
	data := raw.buf.ReadOnlyData()
	if len(data) > limit {
		return status.Errorf(codes.ResourceExhausted, "request message too large: %d bytes (this RPC accepts at most %d)", len(data), limit)
	}
	for _, f := range fields {
		if n := countField(data, f); n > MaxHeaders {
			var v violations
			v.add(f.path, "too many headers: %d (at most %d)", n, MaxHeaders)
			return v.err()
		}
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return status.Errorf(codes.InvalidArgument, "the request is not a valid %s message: %v", m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

// countField counts the occurrences of f on the wire, inside each top-level
// f.parent message when set. Malformed input stops the count (the decoder
// reports it).
func countField(data []byte, f headerField) int {
	n := 0
	for len(data) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(data)
		if tagLen < 0 {
			return n
		}
		valLen := protowire.ConsumeFieldValue(num, typ, data[tagLen:])
		if valLen < 0 {
			return n
		}
		switch {
		case f.outer != 0:
			if num == f.outer && typ == protowire.BytesType {
				if inner, l := protowire.ConsumeBytes(data[tagLen:]); l >= 0 {
					n += countField(inner, headerField{parent: f.parent, num: f.num})
				}
			}
		case f.parent == 0 && num == f.num:
			n++
		case f.parent != 0 && num == f.parent && typ == protowire.BytesType:
			inner, l := protowire.ConsumeBytes(data[tagLen:])
			if l >= 0 {
				n += countField(inner, headerField{num: f.num})
			}
		}
		data = data[tagLen+valLen:]
	}
	return n
}

// serviceDesc is rbv1.BrokerService_ServiceDesc with handlers that receive
// each request raw, check its size for the caller, and decode it
// themselves, so that a malformed message answers INVALID_ARGUMENT (grpc's
// own decoding answers INTERNAL) and an oversized one is never decoded.
func serviceDesc(svc rbv1.BrokerServiceServer) *grpc.ServiceDesc {
	desc := rbv1.BrokerService_ServiceDesc
	limiter, _ := svc.(RequestLimiter)
	limit := func(ctx context.Context, method string, def int) int {
		if limiter != nil {
			return limiter.MaxRequestSize(ctx, method)
		}
		return def
	}
	desc.Methods = []grpc.MethodDesc{
		{MethodName: "Execute", Handler: executeHandler(svc, func(ctx context.Context) int {
			return limit(ctx, rbv1.BrokerService_Execute_FullMethodName, MaxRecvMsgSize)
		})},
		{MethodName: "ClassifyResponse", Handler: unaryHandler(rbv1.BrokerService_ClassifyResponse_FullMethodName, classifyHeaderFields,
			func(ctx context.Context) int {
				return limit(ctx, rbv1.BrokerService_ClassifyResponse_FullMethodName, MaxClassifyMessage)
			},
			svc.ClassifyResponse)},
		{MethodName: "CreateTask", Handler: unaryHandler(rbv1.BrokerService_CreateTask_FullMethodName, createTaskHeaderFields,
			func(ctx context.Context) int {
				return limit(ctx, rbv1.BrokerService_CreateTask_FullMethodName, MaxRecvMsgSize)
			},
			svc.CreateTask)},
		{MethodName: "GetTask", Handler: unaryHandler(rbv1.BrokerService_GetTask_FullMethodName, nil,
			func(context.Context) int { return MaxTaskRefMessage }, svc.GetTask)},
		{MethodName: "ListTasks", Handler: unaryHandler(rbv1.BrokerService_ListTasks_FullMethodName, nil,
			func(context.Context) int { return MaxTaskRefMessage }, svc.ListTasks)},
		{MethodName: "CancelTask", Handler: unaryHandler(rbv1.BrokerService_CancelTask_FullMethodName, nil,
			func(context.Context) int { return MaxTaskRefMessage }, svc.CancelTask)},
		{MethodName: "RetryTask", Handler: unaryHandler(rbv1.BrokerService_RetryTask_FullMethodName, nil,
			func(context.Context) int { return MaxTaskRefMessage }, svc.RetryTask)},
	}
	desc.Streams = []grpc.StreamDesc{{
		StreamName:    "ExecuteStream",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			raw := new(rawMessage)
			if err := stream.RecvMsg(raw); err != nil {
				return err
			}
			defer raw.buf.Free()
			in := new(rbv1.ExecuteRequest)
			lim := limit(stream.Context(), rbv1.BrokerService_ExecuteStream_FullMethodName, MaxRecvMsgSize)
			if err := decodeRequest(raw, lim, executeHeaderFields, in); err != nil {
				return err
			}
			return srv.(rbv1.BrokerServiceServer).ExecuteStream(in,
				&grpc.GenericServerStream[rbv1.ExecuteRequest, rbv1.ExecuteStreamResponse]{ServerStream: stream})
		},
	}, {
		StreamName:    "WatchTask",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			raw := new(rawMessage)
			if err := stream.RecvMsg(raw); err != nil {
				return err
			}
			defer raw.buf.Free()
			in := new(rbv1.WatchTaskRequest)
			if err := decodeRequest(raw, MaxTaskRefMessage, nil, in); err != nil {
				return err
			}
			return srv.(rbv1.BrokerServiceServer).WatchTask(in,
				&grpc.GenericServerStream[rbv1.WatchTaskRequest, rbv1.Task]{ServerStream: stream})
		},
	}}
	return &desc
}

// unaryHandler builds a unary method handler that receives the request
// raw, checks its size and decodes it itself (interceptors then see the
// decoded request, as with grpc's own handlers).
func unaryHandler[Req any, PReq interface {
	*Req
	proto.Message
}, Resp any](method string, fields []headerField, limit func(context.Context) int, call func(context.Context, PReq) (Resp, error),
) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		return serveUnary(srv, ctx, dec, interceptor, method, fields, limit, call)
	}
}

// serveUnary is one call of a unaryHandler.
func serveUnary[Req any, PReq interface {
	*Req
	proto.Message
}, Resp any](srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor,
	method string, fields []headerField, limit func(context.Context) int, call func(context.Context, PReq) (Resp, error),
) (any, error) {
	raw := new(rawMessage)
	if err := dec(raw); err != nil {
		return nil, err
	}
	in := PReq(new(Req))
	err := decodeRequest(raw, limit(ctx), fields, in)
	raw.buf.Free()
	if err != nil {
		return nil, err
	}
	if interceptor == nil {
		return call(ctx, in)
	}
	handler := func(ctx context.Context, req any) (any, error) { return call(ctx, req.(PReq)) }
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, handler)
}

// executeHandler is the handler of Execute: unaryHandler's, and for the
// broker's own Service it encodes the answer itself once the interceptors
// have returned it, and gives its block back to resultBlocks (the codec
// then sends the bytes as they are: encodedReply). Another service (a
// benchmark's baseline) is served as unaryHandler serves it.
func executeHandler(svc rbv1.BrokerServiceServer, limit func(context.Context) int) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	const method = rbv1.BrokerService_Execute_FullMethodName
	s, ok := svc.(*Service)
	if !ok {
		return unaryHandler(method, executeHeaderFields, limit, svc.Execute)
	}
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		var b *resultBlock
		reply, err := serveUnary(srv, ctx, dec, interceptor, method, executeHeaderFields, limit,
			func(ctx context.Context, in *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
				blk, err := s.execute(ctx, in)
				if err != nil {
					return nil, err
				}
				b = blk
				return &blk.r, nil
			})
		if err != nil || b == nil || reply != any(&b.r) {
			return reply, err // an interceptor's own answer, or an error: the block is left to the collector
		}
		data, err := marshalExecuteResponse(&b.r)
		resultBlocks.put(b)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encoding the response: %v", err)
		}
		return &encodedReply{data: data}, nil
	}
}

// encodedReply is an answer encoded already (executeHandler): the codec
// sends its bytes as they are, once.
type encodedReply struct {
	data mem.BufferSlice
}

// String describes an encoded answer for logs without its content.
func (r *encodedReply) String() string { return fmt.Sprintf("response (%d bytes)", r.data.Len()) }

// String describes a raw request for logs without its content.
func (r *rawMessage) String() string { return fmt.Sprintf("request (%d bytes)", r.buf.Len()) }
