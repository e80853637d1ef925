// Protobuf (libprotobuf, proto3; schema/bench.proto): records as one `Users` message built on an
// arena, tensors with their elements as one `bytes` field, and the seed's client, which adds one
// `repeated float` element per value.
#include <google/protobuf/arena.h>

#include <climits>
#include <cstring>

#include "bench.pb.h"
#include "format.h"

namespace weft::bench {
namespace {

using google::protobuf::Arena;
using google::protobuf::MessageLite;

// `m` serialized into `bytes`, which `wire` then views.
std::string serialize(const MessageLite& m, std::string& bytes, std::string_view& wire) {
  if (!m.SerializeToString(&bytes)) return "SerializeToString failed";
  wire = bytes;
  return {};
}
std::string parse(std::string_view wire, MessageLite& m) {
  if (wire.size() > INT_MAX) return "over 2 GiB: more than one Protobuf message can hold";
  if (!m.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return "ParseFromArray failed";
  return {};
}

class RecordsCoder final : public Coder<Records> {
 public:
  std::string encode(const Records& in, std::string_view& wire) override {
    Arena arena;
    auto* users = Arena::CreateMessage<pb::Users>(&arena);
    users->mutable_users()->Reserve(static_cast<int>(in.size()));
    for (const Record& r : in) {
      pb::User* u = users->add_users();
      u->set_name(r.name);
      u->set_age(r.age);
    }
    return serialize(*users, bytes_, wire);
  }
  std::string decode(std::string_view wire, Records& out) override {
    Arena arena;
    auto* users = Arena::CreateMessage<pb::Users>(&arena);
    if (std::string failed = parse(wire, *users); !failed.empty()) return failed;
    out.resize(static_cast<size_t>(users->users_size()));
    for (int i = 0; i < users->users_size(); ++i) {
      const pb::User& u = users->users(i);
      out[static_cast<size_t>(i)].name = u.name();
      out[static_cast<size_t>(i)].age = u.age();
    }
    return {};
  }

 private:
  std::string bytes_;
};

template <typename Message>
void put_header(const auto& in, Message& m) {
  m.set_name(in.name);
  m.set_dtype(in.dtype);
  m.mutable_shape()->Add(in.shape.begin(), in.shape.end());
}
template <typename Message>
void get_header(const Message& m, auto& out) {
  out.name = m.name();
  out.dtype = m.dtype();
  out.shape.assign(m.shape().begin(), m.shape().end());
}

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    pb::Tensor m;
    put_header(in, m);
    m.set_data(in.data.data(), in.data.size() * sizeof(float));
    return serialize(m, bytes_, wire);
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    pb::Tensor m;
    if (std::string failed = parse(wire, m); !failed.empty()) return failed;
    if (m.data().size() % sizeof(float) != 0) return "data is not whole floats";
    get_header(m, out);
    out.data.resize(m.data().size() / sizeof(float));
    std::memcpy(out.data.data(), m.data().data(), m.data().size());
    return {};
  }

 private:
  std::string bytes_;
};

// The seed's client: add_values() once per element.
class RepeatedFloatCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    pb::TensorFloats m;
    put_header(in, m);
    for (float v : in.data) m.add_values(v);
    return serialize(m, bytes_, wire);
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    pb::TensorFloats m;
    if (std::string failed = parse(wire, m); !failed.empty()) return failed;
    get_header(m, out);
    out.data.assign(m.values().begin(), m.values().end());
    return {};
  }

 private:
  std::string bytes_;
};

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    pb::SparseTensor m;
    put_header(in, m);
    m.mutable_indices()->Add(in.indices.begin(), in.indices.end());
    m.mutable_values()->Add(in.values.begin(), in.values.end());
    return serialize(m, bytes_, wire);
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    pb::SparseTensor m;
    if (std::string failed = parse(wire, m); !failed.empty()) return failed;
    get_header(m, out);
    out.indices.assign(m.indices().begin(), m.indices().end());
    out.values.assign(m.values().begin(), m.values().end());
    return {};
  }

 private:
  std::string bytes_;
};

}  // namespace

Format protobuf_format() {
  return {.name = "protobuf",
          .records = factory_of<RecordsCoder>(),
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>()};
}

Format protobuf_repeated_float_format() {
  return {.name = "protobuf-repeated-float", .tensor = factory_of<RepeatedFloatCoder>()};
}

}  // namespace weft::bench
