// JSON with nlohmann/json: a DOM built from the struct and dumped, parsed and read back. Floats
// are JSON numbers (nlohmann prints the shortest text that reads back as the same double, so
// finite fp32 values survive); NaN and Inf have no JSON number and are dumped as null, which
// decode() reports instead of inventing a value.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "format.h"

namespace weft::bench {
namespace {

using nlohmann::json;

// Runs `body`, turning exceptions (nlohmann's parse and type errors, ours) into failure text.
template <typename Body>
std::string guarded(Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

class RecordsCoder final : public Coder<Records> {
 public:
  std::string encode(const Records& in, std::string_view& wire) override {
    return guarded([&] {
      json users = json::array();
      for (const Record& r : in) users.push_back({{"name", r.name}, {"age", r.age}});
      bytes_ = users.dump();
      wire = bytes_;
    });
  }
  std::string decode(std::string_view wire, Records& out) override {
    return guarded([&] {
      json users = json::parse(wire);
      out.resize(users.size());
      size_t i = 0;
      for (const json& u : users) {
        out[i].name = u.at("name").get<std::string>();
        out[i].age = u.at("age").get<int32_t>();
        ++i;
      }
    });
  }

 private:
  std::string bytes_;
};

template <typename In>
json header(const In& in) {
  return {{"name", in.name}, {"dtype", in.dtype}, {"shape", in.shape}};
}
template <typename Out>
void read_header(const json& m, Out& out) {
  out.name = m.at("name").get<std::string>();
  out.dtype = m.at("dtype").get<uint32_t>();
  out.shape = m.at("shape").get<std::vector<int64_t>>();
}
// A number's value as fp32; null (what NaN and Inf were written as) is a type error.
std::vector<float> floats(const json& array) {
  std::vector<float> out;
  out.reserve(array.size());
  for (const json& v : array) {
    if (!v.is_number()) throw std::runtime_error("a float is " + v.dump() + ", not a number");
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    return guarded([&] {
      json m = header(in);
      m["data"] = in.data;
      bytes_ = m.dump();
      wire = bytes_;
    });
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    return guarded([&] {
      json m = json::parse(wire);
      read_header(m, out);
      out.data = floats(m.at("data"));
    });
  }

 private:
  std::string bytes_;
};

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    return guarded([&] {
      json m = header(in);
      m["indices"] = in.indices;
      m["values"] = in.values;
      bytes_ = m.dump();
      wire = bytes_;
    });
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    return guarded([&] {
      json m = json::parse(wire);
      read_header(m, out);
      out.indices = m.at("indices").get<std::vector<int64_t>>();
      out.values = floats(m.at("values"));
    });
  }

 private:
  std::string bytes_;
};

}  // namespace

Format nlohmann_json_format() {
  return {.name = "json-nlohmann",
          .records = factory_of<RecordsCoder>(),
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>()};
}

}  // namespace weft::bench
