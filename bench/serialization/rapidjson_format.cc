// JSON with RapidJSON: written with its SAX Writer straight from the struct, parsed into a DOM
// (full-precision number parsing, which exact floats need) and read back. Its Writer refuses NaN
// and Inf (no JSON number holds them), which encode() reports.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "format.h"

namespace weft::bench {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
constexpr unsigned kParseFlags = rapidjson::kParseFullPrecisionFlag;

const char kNonfinite[] = "NaN or Inf has no JSON number (RapidJSON's Writer refuses it)";

std::string parse(std::string_view wire, rapidjson::Document& doc) {
  doc.Parse<kParseFlags>(wire.data(), wire.size());
  if (doc.HasParseError()) {
    return "parse error at byte " + std::to_string(doc.GetErrorOffset());
  }
  return {};
}

void write_string(Writer& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

template <typename In>
void write_header(Writer& w, const In& in) {
  w.Key("name");
  write_string(w, in.name);
  w.Key("dtype");
  w.Uint(in.dtype);
  w.Key("shape");
  w.StartArray();
  for (int64_t d : in.shape) w.Int64(d);
  w.EndArray();
}
// False when a value is NaN or Inf.
bool write_floats(Writer& w, const std::vector<float>& values) {
  w.StartArray();
  for (float v : values) {
    if (!w.Double(v)) return false;
  }
  return w.EndArray();
}

const rapidjson::Value* member(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(name);
  return it == object.MemberEnd() ? nullptr : &it->value;
}
template <typename Out>
bool read_header(const rapidjson::Value& m, Out& out) {
  const rapidjson::Value *name = member(m, "name"), *dtype = member(m, "dtype"),
                         *shape = member(m, "shape");
  if (name == nullptr || !name->IsString() || dtype == nullptr || !dtype->IsUint() ||
      shape == nullptr || !shape->IsArray()) {
    return false;
  }
  out.name.assign(name->GetString(), name->GetStringLength());
  out.dtype = dtype->GetUint();
  out.shape.clear();
  for (const auto& d : shape->GetArray()) {
    if (!d.IsInt64()) return false;
    out.shape.push_back(d.GetInt64());
  }
  return true;
}
bool read_floats(const rapidjson::Value* array, std::vector<float>& out) {
  if (array == nullptr || !array->IsArray()) return false;
  out.resize(array->Size());
  size_t i = 0;
  for (const auto& v : array->GetArray()) {
    if (!v.IsNumber()) return false;
    out[i++] = static_cast<float>(v.GetDouble());
  }
  return true;
}

class RecordsCoder final : public Coder<Records> {
 public:
  std::string encode(const Records& in, std::string_view& wire) override {
    buffer_.Clear();
    Writer w(buffer_);
    w.StartArray();
    for (const Record& r : in) {
      w.StartObject();
      w.Key("name");
      write_string(w, r.name);
      w.Key("age");
      w.Int(r.age);
      w.EndObject();
    }
    w.EndArray();
    wire = {buffer_.GetString(), buffer_.GetSize()};
    return {};
  }
  std::string decode(std::string_view wire, Records& out) override {
    rapidjson::Document doc;
    if (std::string failed = parse(wire, doc); !failed.empty()) return failed;
    if (!doc.IsArray()) return "not an array";
    out.resize(doc.Size());
    size_t i = 0;
    for (const auto& u : doc.GetArray()) {
      const rapidjson::Value *name = member(u, "name"), *age = member(u, "age");
      if (name == nullptr || !name->IsString() || age == nullptr || !age->IsInt()) {
        return "record " + std::to_string(i) + " is not {name, age}";
      }
      out[i].name.assign(name->GetString(), name->GetStringLength());
      out[i].age = age->GetInt();
      ++i;
    }
    return {};
  }

 private:
  rapidjson::StringBuffer buffer_;
};

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    buffer_.Clear();
    Writer w(buffer_);
    w.StartObject();
    write_header(w, in);
    w.Key("data");
    if (!write_floats(w, in.data)) return kNonfinite;
    w.EndObject();
    wire = {buffer_.GetString(), buffer_.GetSize()};
    return {};
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    rapidjson::Document doc;
    if (std::string failed = parse(wire, doc); !failed.empty()) return failed;
    if (!read_header(doc, out) || !read_floats(member(doc, "data"), out.data)) {
      return "not a tensor object";
    }
    return {};
  }

 private:
  rapidjson::StringBuffer buffer_;
};

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    buffer_.Clear();
    Writer w(buffer_);
    w.StartObject();
    write_header(w, in);
    w.Key("indices");
    w.StartArray();
    for (int64_t i : in.indices) w.Int64(i);
    w.EndArray();
    w.Key("values");
    if (!write_floats(w, in.values)) return kNonfinite;
    w.EndObject();
    wire = {buffer_.GetString(), buffer_.GetSize()};
    return {};
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    rapidjson::Document doc;
    if (std::string failed = parse(wire, doc); !failed.empty()) return failed;
    const rapidjson::Value* indices = member(doc, "indices");
    if (!read_header(doc, out) || indices == nullptr || !indices->IsArray() ||
        !read_floats(member(doc, "values"), out.values)) {
      return "not a sparse tensor object";
    }
    out.indices.clear();
    for (const auto& i : indices->GetArray()) {
      if (!i.IsInt64()) return "an index is not an integer";
      out.indices.push_back(i.GetInt64());
    }
    return {};
  }

 private:
  rapidjson::StringBuffer buffer_;
};

}  // namespace

Format rapidjson_format() {
  return {.name = "json-rapidjson",
          .records = factory_of<RecordsCoder>(),
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>()};
}

}  // namespace weft::bench
