// FlatBuffers (libflatbuffers; schema/bench.fbs): one reused builder per coder, so encode()
// returns the builder's bytes in place. decode() verifies the buffer (as anything read from a
// peer must be) and copies into the struct; reading fields in place without the copy, which
// FlatBuffers allows, would be faster still.
#include <flatbuffers/flatbuffers.h>

#include <cstring>

#include "bench_generated.h"
#include "format.h"

namespace weft::bench {
namespace {

template <typename Root>
const Root* verified_root(std::string_view wire) {
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(wire.data()), wire.size(),
                                 /*max_depth=*/64, /*max_tables=*/uint32_t{1} << 30);
  if (!verifier.VerifyBuffer<Root>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<Root>(wire.data());
}

template <typename Out, typename Root>
bool get_header(const Root* m, Out& out) {
  if (m->name() == nullptr || m->shape() == nullptr) return false;
  out.name.assign(m->name()->data(), m->name()->size());
  out.dtype = m->dtype();
  out.shape.assign(m->shape()->begin(), m->shape()->end());
  return true;
}

std::string_view built(const flatbuffers::FlatBufferBuilder& b) {
  return {reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()};
}

class RecordsCoder final : public Coder<Records> {
 public:
  std::string encode(const Records& in, std::string_view& wire) override {
    builder_.Clear();
    offsets_.clear();
    for (const Record& r : in) {
      offsets_.push_back(fb::CreateUser(builder_, builder_.CreateString(r.name), r.age));
    }
    builder_.Finish(fb::CreateUsers(builder_, builder_.CreateVector(offsets_)));
    wire = built(builder_);
    return {};
  }
  std::string decode(std::string_view wire, Records& out) override {
    const fb::Users* users = verified_root<fb::Users>(wire);
    if (users == nullptr || users->users() == nullptr) return "not a valid Users buffer";
    out.resize(users->users()->size());
    size_t i = 0;
    for (const fb::User* u : *users->users()) {
      if (u->name() == nullptr) return "a user without a name";
      out[i].name.assign(u->name()->data(), u->name()->size());
      out[i].age = u->age();
      ++i;
    }
    return {};
  }

 private:
  flatbuffers::FlatBufferBuilder builder_{1 << 20};
  std::vector<flatbuffers::Offset<fb::User>> offsets_;
};

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    builder_.Clear();
    auto data = builder_.CreateVector(reinterpret_cast<const uint8_t*>(in.data.data()),
                                      in.data.size() * sizeof(float));
    builder_.Finish(fb::CreateTensor(builder_, builder_.CreateString(in.name), in.dtype,
                                     builder_.CreateVector(in.shape), data));
    wire = built(builder_);
    return {};
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    const fb::Tensor* m = verified_root<fb::Tensor>(wire);
    if (m == nullptr || m->data() == nullptr || !get_header(m, out)) {
      return "not a valid Tensor buffer";
    }
    if (m->data()->size() % sizeof(float) != 0) return "data is not whole floats";
    out.data.resize(m->data()->size() / sizeof(float));
    std::memcpy(out.data.data(), m->data()->data(), m->data()->size());
    return {};
  }

 private:
  flatbuffers::FlatBufferBuilder builder_{1 << 20};
};

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    builder_.Clear();
    auto indices = builder_.CreateVector(in.indices);
    auto values = builder_.CreateVector(in.values);
    builder_.Finish(fb::CreateSparseTensor(builder_, builder_.CreateString(in.name), in.dtype,
                                           builder_.CreateVector(in.shape), indices, values));
    wire = built(builder_);
    return {};
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    const fb::SparseTensor* m = verified_root<fb::SparseTensor>(wire);
    if (m == nullptr || m->indices() == nullptr || m->values() == nullptr || !get_header(m, out)) {
      return "not a valid SparseTensor buffer";
    }
    out.indices.assign(m->indices()->begin(), m->indices()->end());
    out.values.assign(m->values()->begin(), m->values()->end());
    return {};
  }

 private:
  flatbuffers::FlatBufferBuilder builder_{1 << 20};
};

}  // namespace

Format flatbuffers_format() {
  return {.name = "flatbuffers",
          .records = factory_of<RecordsCoder>(),
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>()};
}

}  // namespace weft::bench
