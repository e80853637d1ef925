// Avro (the C library, avro-c; schemas schema/*.avsc): generic values reused between calls, the
// binary encoding into and out of memory. Records are the binary encoding of an array of User in
// one block (count, records, 0); avro-c's generic array would hold all million as values, so the
// block's count and end are written here and each record by avro-c. A tensor's elements are one
// `bytes` field, handed to avro-c without a copy.
#include <avro.h>

#include <cstring>

#include "avro_schemas.h"
#include "format.h"

namespace weft::bench {
namespace {

std::string avro_failure(const char* what) { return std::string(what) + ": " + avro_strerror(); }

// A generic value of one schema, its reader and writer; move-free, released in the destructor.
class AvroValue {
 public:
  explicit AvroValue(std::string_view schema_json) {
    if (avro_schema_from_json_length(schema_json.data(), schema_json.size(), &schema_) != 0) {
      failure_ = avro_failure("schema");
      return;
    }
    iface_ = avro_generic_class_from_schema(schema_);
    if (iface_ == nullptr || avro_generic_value_new(iface_, &value_) != 0) {
      failure_ = avro_failure("generic value");
      return;
    }
    has_value_ = true;
    reader_ = avro_reader_memory(nullptr, 0);
    writer_ = avro_writer_memory(nullptr, 0);
  }
  AvroValue(const AvroValue&) = delete;
  AvroValue& operator=(const AvroValue&) = delete;
  ~AvroValue() {
    if (writer_ != nullptr) avro_writer_free(writer_);
    if (reader_ != nullptr) avro_reader_free(reader_);
    if (has_value_) avro_value_decref(&value_);
    if (iface_ != nullptr) avro_value_iface_decref(iface_);
    if (schema_ != nullptr) avro_schema_decref(schema_);
  }

  const std::string& failure() const { return failure_; }
  avro_value_t& value() { return value_; }
  avro_value_t field(size_t index) {
    avro_value_t f;
    avro_value_get_by_index(&value_, index, &f, nullptr);
    return f;
  }
  // Points the writer at `out`, grown to at least `bound` bytes.
  avro_writer_t writer(std::string& out, size_t bound) {
    if (out.size() < bound) out.resize(bound);
    avro_writer_memory_set_dest(writer_, out.data(), static_cast<int64_t>(out.size()));
    return writer_;
  }
  avro_reader_t reader(std::string_view in) {
    avro_reader_memory_set_source(reader_, in.data(), static_cast<int64_t>(in.size()));
    return reader_;
  }

 private:
  avro_schema_t schema_ = nullptr;
  avro_value_iface_t* iface_ = nullptr;
  avro_value_t value_{};
  bool has_value_ = false;
  avro_reader_t reader_ = nullptr;
  avro_writer_t writer_ = nullptr;
  std::string failure_;
};

constexpr size_t kMaxVarint = 10;  // an Avro long, zig-zag varint

// An Avro long (zig-zag, then 7 bits a byte, low first) at `out`; its size.
size_t put_long(char* out, uint64_t v) {
  uint64_t z = v << 1;  // v >= 0 here: zig-zag is a shift
  size_t n = 0;
  for (; z >= 0x80; z >>= 7) out[n++] = static_cast<char>((z & 0x7f) | 0x80);
  out[n++] = static_cast<char>(z);
  return n;
}
// The Avro long at the start of `in` into `v`; the bytes it took, 0 if none is there.
size_t get_long(std::string_view in, int64_t& v) {
  uint64_t z = 0;
  for (size_t n = 0; n < in.size() && n < kMaxVarint; ++n) {
    z |= uint64_t{static_cast<uint8_t>(in[n]) & 0x7fu} << (7 * n);
    if ((static_cast<uint8_t>(in[n]) & 0x80) == 0) {
      v = static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
      return n + 1;
    }
  }
  return 0;
}

// Records are Avro's encoding of an array<User> in one block: the count, the records, 0.
class RecordsCoder final : public Coder<Records> {
 public:
  std::string encode(const Records& in, std::string_view& wire) override {
    if (!user_.failure().empty()) return user_.failure();
    size_t bound = 2 * kMaxVarint;
    for (const Record& r : in) bound += r.name.size() + 2 * kMaxVarint;
    avro_writer_t w = user_.writer(bytes_, bound);
    size_t head = put_long(bytes_.data(), in.size());
    avro_writer_memory_set_dest(w, bytes_.data() + head,
                                static_cast<int64_t>(bytes_.size() - head));
    avro_value_t name = user_.field(0), age = user_.field(1);
    for (const Record& r : in) {
      // avro-c's string sizes count the terminating NUL.
      if (avro_value_set_string_len(&name, r.name.c_str(), r.name.size() + 1) != 0 ||
          avro_value_set_int(&age, r.age) != 0 || avro_value_write(w, &user_.value()) != 0) {
        return avro_failure("write");
      }
    }
    size_t end = head + static_cast<size_t>(avro_writer_tell(w));
    bytes_[end] = '\0';  // the array's end: a block of no items
    wire = std::string_view(bytes_).substr(0, end + 1);
    return {};
  }
  std::string decode(std::string_view wire, Records& out) override {
    if (!user_.failure().empty()) return user_.failure();
    int64_t count = 0;
    size_t head = get_long(wire, count);
    // Every record takes at least two bytes: a count beyond that is a lie, not an allocation.
    if (head == 0 || count < 0 || static_cast<uint64_t>(count) > wire.size() / 2 ||
        wire.back() != '\0') {
      return "not one block of an array";
    }
    avro_reader_t r = user_.reader(wire.substr(head, wire.size() - head - 1));
    out.resize(static_cast<size_t>(count));
    for (Record& record : out) {
      if (avro_value_read(r, &user_.value()) != 0) return avro_failure("read");
      avro_value_t name = user_.field(0), age = user_.field(1);
      const char* text = nullptr;
      size_t size = 0;
      int32_t years = 0;
      if (avro_value_get_string(&name, &text, &size) != 0 || size == 0 ||
          avro_value_get_int(&age, &years) != 0) {
        return avro_failure("get");
      }
      record.name.assign(text, size - 1);
      record.age = years;
    }
    return {};
  }

 private:
  AvroValue user_{kUserSchema};
  std::string bytes_;
};

template <typename In>
std::string put_header(AvroValue& v, const In& in) {
  avro_value_reset(&v.value());
  avro_value_t name = v.field(0), dtype = v.field(1), shape = v.field(2);
  if (avro_value_set_string_len(&name, in.name.c_str(), in.name.size() + 1) != 0 ||
      avro_value_set_int(&dtype, static_cast<int32_t>(in.dtype)) != 0) {
    return avro_failure("set");
  }
  for (int64_t d : in.shape) {
    avro_value_t element;
    if (avro_value_append(&shape, &element, nullptr) != 0 ||
        avro_value_set_long(&element, d) != 0) {
      return avro_failure("append");
    }
  }
  return {};
}

template <typename Out>
std::string get_header(AvroValue& v, Out& out) {
  avro_value_t name = v.field(0), dtype = v.field(1), shape = v.field(2);
  const char* text = nullptr;
  size_t size = 0, count = 0;
  int32_t code = 0;
  if (avro_value_get_string(&name, &text, &size) != 0 || size == 0 ||
      avro_value_get_int(&dtype, &code) != 0 || avro_value_get_size(&shape, &count) != 0) {
    return avro_failure("get");
  }
  out.name.assign(text, size - 1);
  out.dtype = static_cast<uint32_t>(code);
  out.shape.resize(count);
  for (size_t i = 0; i < count; ++i) {
    avro_value_t element;
    if (avro_value_get_by_index(&shape, i, &element, nullptr) != 0 ||
        avro_value_get_long(&element, &out.shape[i]) != 0) {
      return avro_failure("shape");
    }
  }
  return {};
}

std::string write(AvroValue& v, std::string& bytes, size_t bound, std::string_view& wire) {
  avro_writer_t w = v.writer(bytes, bound);
  if (avro_value_write(w, &v.value()) != 0) return avro_failure("write");
  wire = std::string_view(bytes).substr(0, static_cast<size_t>(avro_writer_tell(w)));
  return {};
}

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    if (!tensor_.failure().empty()) return tensor_.failure();
    if (std::string failed = put_header(tensor_, in); !failed.empty()) return failed;
    avro_value_t data = tensor_.field(3);
    avro_wrapped_buffer_t borrowed;  // the tensor's own memory: no copy into the value
    size_t data_bytes = in.data.size() * sizeof(float);
    if (avro_wrapped_buffer_new(&borrowed, in.data.data(), data_bytes) != 0 ||
        avro_value_give_bytes(&data, &borrowed) != 0) {
      return avro_failure("bytes");
    }
    size_t bound = data_bytes + in.name.size() + (in.shape.size() + 4) * kMaxVarint;
    return write(tensor_, bytes_, bound, wire);
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    if (!tensor_.failure().empty()) return tensor_.failure();
    if (avro_value_read(tensor_.reader(wire), &tensor_.value()) != 0) return avro_failure("read");
    if (std::string failed = get_header(tensor_, out); !failed.empty()) return failed;
    avro_value_t data = tensor_.field(3);
    const void* bytes = nullptr;
    size_t size = 0;
    if (avro_value_get_bytes(&data, &bytes, &size) != 0) return avro_failure("bytes");
    if (size % sizeof(float) != 0) return "data is not whole floats";
    out.data.resize(size / sizeof(float));
    std::memcpy(out.data.data(), bytes, size);
    return {};
  }

 private:
  AvroValue tensor_{kTensorSchema};
  std::string bytes_;
};

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    if (!sparse_.failure().empty()) return sparse_.failure();
    if (std::string failed = put_header(sparse_, in); !failed.empty()) return failed;
    avro_value_t indices = sparse_.field(3), values = sparse_.field(4);
    for (size_t i = 0; i < in.indices.size(); ++i) {
      avro_value_t index, value;
      if (avro_value_append(&indices, &index, nullptr) != 0 ||
          avro_value_set_long(&index, in.indices[i]) != 0 ||
          avro_value_append(&values, &value, nullptr) != 0 ||
          avro_value_set_float(&value, in.values[i]) != 0) {
        return avro_failure("append");
      }
    }
    size_t bound = in.name.size() + (in.shape.size() + 8) * kMaxVarint +
                   in.indices.size() * (kMaxVarint + sizeof(float));
    return write(sparse_, bytes_, bound, wire);
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    if (!sparse_.failure().empty()) return sparse_.failure();
    if (avro_value_read(sparse_.reader(wire), &sparse_.value()) != 0) return avro_failure("read");
    if (std::string failed = get_header(sparse_, out); !failed.empty()) return failed;
    avro_value_t indices = sparse_.field(3), values = sparse_.field(4);
    size_t count = 0, value_count = 0;
    avro_value_get_size(&indices, &count);
    avro_value_get_size(&values, &value_count);
    if (count != value_count) return "as many indices as values expected";
    out.indices.resize(count);
    out.values.resize(count);
    for (size_t i = 0; i < count; ++i) {
      avro_value_t index, value;
      if (avro_value_get_by_index(&indices, i, &index, nullptr) != 0 ||
          avro_value_get_long(&index, &out.indices[i]) != 0 ||
          avro_value_get_by_index(&values, i, &value, nullptr) != 0 ||
          avro_value_get_float(&value, &out.values[i]) != 0) {
        return avro_failure("element");
      }
    }
    return {};
  }

 private:
  AvroValue sparse_{kSparseSchema};
  std::string bytes_;
};

}  // namespace

Format avro_format() {
  return {.name = "avro",
          .records = factory_of<RecordsCoder>(),
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>()};
}

}  // namespace weft::bench
