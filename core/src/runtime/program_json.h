// The Program as human-readable JSON: the metadata half of the executable file format. Enums are
// written as names (never numbers) so a person can read a saved executable and so renumbering an
// enum cannot silently change a file's meaning. Constants' bytes are not here (file_format.cc).
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::rt {

// Every field of `program` except `constants`. Fields that hold their default value are omitted
// where that keeps the text short (kernel attributes of other kinds); reading restores defaults.
nlohmann::json program_to_json(const Program& program);

// The inverse of program_to_json; `program->constants` is left untouched. Missing or mistyped
// fields and unknown names give kDataLoss naming the field; never throws.
Status program_from_json(const nlohmann::json& json, Program* program);

// "cpu", "gpu:0".

// Strict JSON field access for untrusted metadata. Failures throw JsonFieldError, which the
// file format's entry points catch and turn into kDataLoss (nlohmann reports through exceptions
// too, so one try/catch at the boundary covers both).
struct JsonFieldError {
  std::string message;
};
const nlohmann::json& json_field(const nlohmann::json& object, const char* key, const std::string& path);
int64_t json_int(const nlohmann::json& value, const std::string& path);
std::string json_string(const nlohmann::json& value, const std::string& path);
const nlohmann::json& json_array(const nlohmann::json& value, const std::string& path);
std::vector<int64_t> json_int_list(const nlohmann::json& value, const std::string& path);
DType json_dtype(const nlohmann::json& value, const std::string& path);

}  // namespace tripy::rt
