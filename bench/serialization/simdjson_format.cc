// JSON decoded with simdjson's On-Demand API (simdjson has no writer: the bytes come from
// RapidJSON's, whose encode figures are its own row). The struct is filled straight from the
// parse, without a DOM.
#include <simdjson.h>

#include "format.h"

namespace weft::bench {
namespace {

namespace od = simdjson::ondemand;
static_assert(simdjson::SIMDJSON_PADDING <= kWirePadding);

std::string failure(simdjson::error_code e) { return simdjson::error_message(e); }

template <typename Out>
simdjson::error_code read_header(od::document& doc, Out& out) {
  std::string_view name;
  uint64_t dtype = 0;
  od::array shape;
  if (auto e = doc.find_field("name").get_string().get(name)) return e;
  if (auto e = doc.find_field("dtype").get_uint64().get(dtype)) return e;
  if (auto e = doc.find_field("shape").get_array().get(shape)) return e;
  out.name.assign(name);
  out.dtype = static_cast<uint32_t>(dtype);
  out.shape.clear();
  for (auto d : shape) {
    int64_t v = 0;
    if (auto e = d.get_int64().get(v)) return e;
    out.shape.push_back(v);
  }
  return simdjson::SUCCESS;
}

simdjson::error_code read_floats(od::array array, std::vector<float>& out) {
  out.clear();
  for (auto v : array) {
    double d = 0;
    if (auto e = v.get_double().get(d)) return e;
    out.push_back(static_cast<float>(d));
  }
  return simdjson::SUCCESS;
}

template <typename T>
class SimdjsonCoder : public Coder<T> {
 public:
  explicit SimdjsonCoder(std::unique_ptr<Coder<T>> writer) : writer_(std::move(writer)) {}
  std::string encode(const T& in, std::string_view& wire) override {
    return writer_->encode(in, wire);
  }
  std::string decode(std::string_view wire, T& out) override {
    od::document doc;
    simdjson::padded_string_view padded(wire.data(), wire.size(), wire.size() + kWirePadding);
    if (auto e = parser_.iterate(padded).get(doc)) return failure(e);
    if (auto e = read(doc, out)) return failure(e);
    return {};
  }

 private:
  simdjson::error_code read(od::document& doc, T& out);
  std::unique_ptr<Coder<T>> writer_;
  od::parser parser_;
};

template <>
simdjson::error_code SimdjsonCoder<Records>::read(od::document& doc, Records& out) {
  od::array users;
  if (auto e = doc.get_array().get(users)) return e;
  size_t count = 0;
  for (auto u : users) {
    od::object user;
    std::string_view name;
    int64_t age = 0;
    if (auto e = u.get_object().get(user)) return e;
    if (auto e = user.find_field("name").get_string().get(name)) return e;
    if (auto e = user.find_field("age").get_int64().get(age)) return e;
    if (count == out.size()) out.emplace_back();  // else reuse the record (and its string)
    out[count].name.assign(name);
    out[count].age = static_cast<int32_t>(age);
    ++count;
  }
  out.resize(count);
  return simdjson::SUCCESS;
}

template <>
simdjson::error_code SimdjsonCoder<Tensor>::read(od::document& doc, Tensor& out) {
  od::array data;
  if (auto e = read_header(doc, out)) return e;
  if (auto e = doc.find_field("data").get_array().get(data)) return e;
  return read_floats(data, out.data);
}

template <>
simdjson::error_code SimdjsonCoder<SparseTensor>::read(od::document& doc, SparseTensor& out) {
  od::array indices, values;
  if (auto e = read_header(doc, out)) return e;
  if (auto e = doc.find_field("indices").get_array().get(indices)) return e;
  out.indices.clear();
  for (auto i : indices) {
    int64_t v = 0;
    if (auto e = i.get_int64().get(v)) return e;
    out.indices.push_back(v);
  }
  if (auto e = doc.find_field("values").get_array().get(values)) return e;
  return read_floats(values, out.values);
}

}  // namespace

Format simdjson_format() {
  Format rapid = rapidjson_format();
  return {
      .name = "json-simdjson",
      .records = [rapid] { return std::make_unique<SimdjsonCoder<Records>>(rapid.records()); },
      .tensor = [rapid] { return std::make_unique<SimdjsonCoder<Tensor>>(rapid.tensor()); },
      .sparse = [rapid] { return std::make_unique<SimdjsonCoder<SparseTensor>>(rapid.sparse()); },
      .encode_timed = false};
}

}  // namespace weft::bench
