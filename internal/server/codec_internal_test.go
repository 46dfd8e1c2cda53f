package server

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// brokerMessageTypes are every message type of the broker's proto file.
func brokerMessageTypes(t testing.TB) []protoreflect.MessageType {
	t.Helper()
	var out []protoreflect.MessageType
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			if md.IsMapEntry() {
				continue
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatalf("%s: %v", md.FullName(), err)
			}
			out = append(out, mt)
			walk(md.Messages())
		}
	}
	walk(rbv1.File_retrybroker_v1_broker_proto.Messages())
	if len(out) < 10 {
		t.Fatalf("only %d message types", len(out))
	}
	return out
}

// fill sets every field of m, recursively to depth levels, with values
// that vary with seed: each oneof gets the member seed selects, repeated
// fields two entries, scalars non-zero values of their kind.
func fill(m protoreflect.Message, seed, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if od.Fields().Get(seed%od.Fields().Len()) != fd {
				continue
			}
		}
		switch {
		case fd.IsMap():
			continue
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 2 {
				if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
					if depth == 0 {
						break
					}
					e := l.NewElement()
					fill(e.Message(), seed+j, depth-1)
					l.Append(e)
				} else {
					l.Append(scalar(fd, seed+j))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				fill(m.Mutable(fd).Message(), seed+i, depth-1)
			}
		default:
			m.Set(fd, scalar(fd, seed+i))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, seed int) protoreflect.Value {
	n := seed*7919 + 3
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(1 + n%(vs.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-int64(n) << 33)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n) << 40)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) / 3)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) / 3)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d-ü", fd.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(bytes.Repeat([]byte{byte(n)}, 1+n%40))
	}
	panic(fmt.Sprintf("kind %v", fd.Kind()))
}

// TestCodecMarshalsEveryMessageAsProtoDoes: the generated marshaller of
// every message of the broker's service (marshalVT) writes the bytes
// proto.Marshal gives (deterministic), for every field of every message,
// every member of every oneof, small messages and ones large enough for
// gRPC's buffer pool; and the codec writes them for the answers it
// encodes with it.
func TestCodecMarshalsEveryMessageAsProtoDoes(t *testing.T) {
	c := newRawCodec()
	for _, mt := range brokerMessageTypes(t) {
		for seed := range 4 {
			for _, depth := range []int{0, 4} {
				m := mt.New()
				fill(m, seed, depth)
				msg := m.Interface()
				if seed == 3 {
					// Past gRPC's pooling threshold.
					m.SetUnknown(protoreflect.RawFields(protowireBytes(99, bytes.Repeat([]byte("x"), 2<<10))))
				}
				assertSameEncoding(t, c, msg)
			}
		}
	}
}

// protowireBytes is a length-delimited field num holding b.
func protowireBytes(num int, b []byte) []byte {
	out := []byte{byte(num<<3 | 2)}
	if num >= 16 {
		out = []byte{byte(num<<3|2) | 0x80, byte(num >> 4)}
	}
	n := len(b)
	for n >= 0x80 {
		out = append(out, byte(n)|0x80)
		n >>= 7
	}
	return append(append(out, byte(n)), b...)
}

// assertSameEncoding checks marshalVT on msg against proto.Marshal, and the
// codec too when msg is one of the answers it encodes with marshalVT (the
// codec's other messages go to proto.Marshal itself).
func assertSameEncoding(t *testing.T, c rawCodec, msg proto.Message) {
	t.Helper()
	name := msg.ProtoReflect().Descriptor().FullName()
	vt, ok := msg.(vtMessage)
	if !ok {
		t.Fatalf("%s has no generated marshaller", name)
	}
	// The broker never builds messages with unknown fields inside a
	// Timestamp or Duration for the codec's generated path, and the
	// generated marshaller drops them (see vtMessage).
	dropWKTUnknown(msg.ProtoReflect())
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(how string, got mem.BufferSlice, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %s: %v", how, name, err)
		}
		defer got.Free()
		if b := got.Materialize(); !bytes.Equal(b, want) {
			back := msg.ProtoReflect().New().Interface()
			uerr := proto.Unmarshal(b, back)
			t.Fatalf("%s %s: wrote %d bytes, proto.Marshal %d; decoded back equal: %v (%v)",
				how, name, len(b), len(want), uerr == nil && proto.Equal(back, msg), uerr)
		}
		if len(want) > 0 && !mem.IsBelowBufferPoolingThreshold(len(want)) && len(got) != 1 {
			t.Fatalf("%s %s: %d buffers for a pooled message", how, name, len(got))
		}
	}
	got, err := marshalVT(vt)
	check("marshalVT", got, err)
	if generated[name] {
		got, err := c.Marshal(msg)
		check("codec", got, err)
	}
}

// generated are the messages the codec encodes with their generated
// marshaller.
var generated = map[protoreflect.FullName]bool{
	"retrybroker.v1.ExecuteResponse":          true,
	"retrybroker.v1.ExecuteStreamResponse":    true,
	"retrybroker.v1.ClassifyResponseResponse": true,
}

// dropWKTUnknown clears the unknown fields of every Timestamp and Duration
// inside m.
func dropWKTUnknown(m protoreflect.Message) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		m.SetUnknown(nil)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for i := range v.List().Len() {
				dropWKTUnknown(v.List().Get(i).Message())
			}
		case !fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			dropWKTUnknown(v.Message())
		}
		return true
	})
}

// TestCodecUsesTheGeneratedMarshaller: the hot answers go through the
// generated marshaller (a Timestamp's unknown field, which only it drops,
// is gone), and a task, which carries a caller's request back, through
// proto.Marshal (kept).
func TestCodecUsesTheGeneratedMarshaller(t *testing.T) {
	c := newRawCodec()
	unknown := protoreflect.RawFields(protowireBytes(15, []byte("kept?")))
	for _, tc := range []struct {
		msg  proto.Message
		ts   func(proto.Message) protoreflect.Message
		kept bool
	}{
		{&rbv1.ExecuteResponse{Attempts: []*rbv1.Attempt{{Number: 1, StartTime: tsWith(unknown)}}}, func(m proto.Message) protoreflect.Message {
			return m.(*rbv1.ExecuteResponse).GetAttempts()[0].GetStartTime().ProtoReflect()
		}, false},
		{&rbv1.Task{CreateTime: tsWith(unknown)}, func(m proto.Message) protoreflect.Message {
			return m.(*rbv1.Task).GetCreateTime().ProtoReflect()
		}, true},
	} {
		got, err := c.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		back := tc.msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(got.Materialize(), back); err != nil {
			t.Fatal(err)
		}
		got.Free()
		if kept := len(tc.ts(back).GetUnknown()) > 0; kept != tc.kept {
			t.Fatalf("%T: unknown field kept %v, want %v", tc.msg, kept, tc.kept)
		}
	}
}

func tsWith(unknown protoreflect.RawFields) *timestamppb.Timestamp {
	ts := &timestamppb.Timestamp{Seconds: 1}
	ts.ProtoReflect().SetUnknown(unknown)
	return ts
}

// FuzzCodecMarshal decodes arbitrary bytes as one of the broker's message
// types (chosen by the first byte) and checks that the server's codec
// encodes what was decoded as proto.Marshal does.
func FuzzCodecMarshal(f *testing.F) {
	types := brokerMessageTypes(f)
	for i, mt := range types {
		m := mt.New()
		fill(m, i, 3)
		b, err := proto.Marshal(m.Interface())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{byte(i)}, b...))
	}
	c := newRawCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		msg := types[int(data[0])%len(types)].New().Interface()
		if proto.Unmarshal(data[1:], msg) != nil {
			return
		}
		assertSameEncoding(t, c, msg)
	})
}
