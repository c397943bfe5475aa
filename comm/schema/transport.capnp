@0xedcf905bdbb90e55;
# The transport's own frames: the handshake (hello, its reply) and the header that travels
# next to a tensor's payload. The messages between processes are protocol/'s
# (protocol/schema/messages.capnp); to this module they are opaque control payloads.

$import "/capnp/c++.capnp".namespace("sailor::comm::schema");

struct Hello {
  magic @0 :UInt64;          # 0x5341494c4f520001 ("SAILOR" + 1)
  protocolVersion @1 :UInt32;
  name @2 :Text;
  zone @3 :Text;
  nonce @4 :Data;            # the client's challenge (empty: no job token; see comm/auth.hpp)
}

struct HelloReply {
  accepted @0 :Bool;
  reason @1 :Text;           # why it was refused
  protocolVersion @2 :UInt32;
  name @3 :Text;
  zone @4 :Text;
  nonce @5 :Data;            # the server's challenge (empty: no job token)
  proof @6 :Data;            # HMAC of the job token over the transcript (comm/auth.hpp)
}

enum DType { f32 @0; f16 @1; bf16 @2; f64 @3; i64 @4; i32 @5; i8 @6; u8 @7; }

struct TensorHeader {
  dtype @0 :DType;
  shape @1 :List(Int64);
  tag @2 :UInt64;
  name @3 :Text;
  bytes @4 :UInt64;
}
